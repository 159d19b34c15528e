// json.h: the JSON a toolgate component in C needs (made by `toolgate new`).
//
//   json_get_string(s, len, "key")  the string member "key" of the object in
//                                   s[0..len), unescaped, or NULL
//   json_decode_string(s, len)      the JSON string s[0..len), unescaped, or NULL
//   json_quote("text")              "text" as a JSON string, quotes included
//
// Each returns a NUL-terminated string from malloc (free it; hand it to the
// host as a `component_string_t` and the host frees it). A `\u0000` in the
// input ends the returned string early. No WASI function is used.
#ifndef TOOLGATE_JSON_H
#define TOOLGATE_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t json_ws(const uint8_t *s, size_t len, size_t i) {
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  return i;
}

static int json_hex4(const uint8_t *s, size_t len, size_t i) {
  if (i + 4 > len) return -1;
  int v = 0;
  for (size_t k = i; k < i + 4; k++) {
    uint8_t c = s[k];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t json_utf8(char *out, uint32_t cp) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// The JSON string starting at s[i] (a `"`), unescaped; *end is set past its
// closing quote. NULL when it is not a well-formed string.
static char *json_string_at(const uint8_t *s, size_t len, size_t i, size_t *end) {
  if (i >= len || s[i] != '"') return NULL;
  char *out = malloc(len - i + 1);  // unescaping never grows the text
  if (!out) return NULL;
  size_t o = 0;
  for (i++; i < len; i++) {
    uint8_t c = s[i];
    if (c == '"') {
      out[o] = 0;
      *end = i + 1;
      return out;
    }
    if (c != '\\') { out[o++] = (char)c; continue; }
    if (++i >= len) break;
    switch (s[i]) {
      case '"': out[o++] = '"'; break;
      case '\\': out[o++] = '\\'; break;
      case '/': out[o++] = '/'; break;
      case 'b': out[o++] = '\b'; break;
      case 'f': out[o++] = '\f'; break;
      case 'n': out[o++] = '\n'; break;
      case 'r': out[o++] = '\r'; break;
      case 't': out[o++] = '\t'; break;
      case 'u': {
        int hi = json_hex4(s, len, i + 1);
        if (hi < 0) goto bad;
        i += 4;
        uint32_t cp = (uint32_t)hi;
        if (hi >= 0xD800 && hi < 0xDC00 && i + 2 < len && s[i + 1] == '\\' && s[i + 2] == 'u') {
          int lo = json_hex4(s, len, i + 3);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            i += 6;
          }
        }
        o += json_utf8(out + o, cp);  // 6 or 12 input bytes, at most 4 out
        break;
      }
      default: goto bad;
    }
  }
bad:
  free(out);
  return NULL;
}

// Past the JSON value starting at s[i] (not checked, only skipped).
static size_t json_skip(const uint8_t *s, size_t len, size_t i) {
  int depth = 0;
  while (i < len) {
    uint8_t c = s[i];
    if (c == '"') {
      for (i++; i < len && s[i] != '"'; i++)
        if (s[i] == '\\') i++;
      i++;
    } else if (c == '{' || c == '[') {
      depth++;
      i++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      depth--;
      i++;
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
      return i;
    } else {
      i++;
    }
    if (depth == 0 && (c == '"' || c == '}' || c == ']')) return i;
  }
  return i;
}

// The string member `key` of the JSON object s[0..len), unescaped (free it),
// or NULL when the member is absent or not a string.
__attribute__((unused)) static char *json_get_string(const uint8_t *s, size_t len, const char *key) {
  size_t i = json_ws(s, len, 0);
  if (i >= len || s[i] != '{') return NULL;
  i++;
  for (;;) {
    i = json_ws(s, len, i);
    char *k = json_string_at(s, len, i, &i);
    if (!k) return NULL;
    bool match = strcmp(k, key) == 0;
    free(k);
    i = json_ws(s, len, i);
    if (i >= len || s[i] != ':') return NULL;
    i = json_ws(s, len, i + 1);
    if (match) return json_string_at(s, len, i, &i);
    i = json_ws(s, len, json_skip(s, len, i));
    if (i >= len || s[i] != ',') return NULL;
    i++;
  }
}

// The JSON string s[0..len) (a whole value, quotes included), unescaped.
__attribute__((unused)) static char *json_decode_string(const uint8_t *s, size_t len) {
  size_t end = 0;
  return json_string_at(s, len, json_ws(s, len, 0), &end);
}

// `text` as a JSON string, quotes included (free it).
__attribute__((unused)) static char *json_quote(const char *text) {
  size_t n = strlen(text);
  char *out = malloc(n * 6 + 3);
  if (!out) return NULL;
  size_t o = 0;
  out[o++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
    } else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      memcpy(out + o, "\\u00", 4);
      out[o + 4] = hex[c >> 4];
      out[o + 5] = hex[c & 15];
      o += 6;
    } else {
      out[o++] = (char)c;
    }
  }
  out[o++] = '"';
  out[o] = 0;
  return out;
}

#endif
