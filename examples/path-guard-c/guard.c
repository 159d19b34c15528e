// A guard that denies calls whose arguments name a denied path: a `.git`
// directory, a `.env` file, an `.ssh` directory (by default).
//
// Every string value in the call's arguments is split into words (on
// white space and shell punctuation, so `cat ~/.ssh/id_rsa` and
// `--file=.env` are seen) and each word into path components; a component
// that matches a pattern denies the call. A pattern is a name (`.git`) or
// a name prefix ending in `*` (`.env.*`).
//
// Settings (the `vars` of `[plugins.path-guard]`, read as environment
// variables through `wasi:cli/environment`):
//   DENY   comma-separated patterns (default `.git,.env,.env.*,.ssh`)
//
// The component imports only `toolgate:plugin/types` (the call handle) and
// `wasi:cli/environment`: nothing that can wait, so the host calls it on
// its synchronous path.

#include <stdlib.h>
#include <string.h>

#include "path_guard.h"

#define MAX_PATTERNS 64

static char *patterns[MAX_PATTERNS];
static size_t pattern_count = 0;
static bool configured = false;

static void add_pattern(const char *start, size_t len) {
  while (len > 0 && (*start == ' ' || *start == '\t')) { start++; len--; }
  while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t')) len--;
  if (len == 0 || pattern_count == MAX_PATTERNS) return;
  char *p = malloc(len + 1);
  if (!p) return;
  memcpy(p, start, len);
  p[len] = 0;
  patterns[pattern_count++] = p;
}

static void configure(void) {
  if (configured) return;
  configured = true;
  const char *deny = ".git,.env,.env.*,.ssh";
  size_t deny_len = strlen(deny);
  path_guard_list_tuple2_string_string_t env;
  wasi_cli_environment_get_environment(&env);
  for (size_t i = 0; i < env.len; i++) {
    path_guard_string_t *k = &env.ptr[i].f0;
    if (k->len == 4 && memcmp(k->ptr, "DENY", 4) == 0) {
      deny = (const char *)env.ptr[i].f1.ptr;
      deny_len = env.ptr[i].f1.len;
    }
  }
  size_t start = 0;
  for (size_t i = 0; i <= deny_len; i++) {
    if (i == deny_len || deny[i] == ',') {
      add_pattern(deny + start, i - start);
      start = i + 1;
    }
  }
  path_guard_list_tuple2_string_string_free(&env);
}

// Does the path component [s, s+len) match a pattern? Returns it, or NULL.
static const char *match(const char *s, size_t len) {
  for (size_t i = 0; i < pattern_count; i++) {
    const char *p = patterns[i];
    size_t plen = strlen(p);
    if (plen > 0 && p[plen - 1] == '*') {
      if (len >= plen - 1 && memcmp(s, p, plen - 1) == 0) return p;
    } else if (len == plen && memcmp(s, p, len) == 0) {
      return p;
    }
  }
  return NULL;
}

static bool is_word_break(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '|' ||
         c == '&' || c == '<' || c == '>' || c == '(' || c == ')' || c == '\'' ||
         c == '"' || c == '`' || c == '=' || c == ',' || c == ':';
}

// The first denied component of any word of `s`.
static const char *denied_in(const char *s, size_t len) {
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || is_word_break(s[i]) || s[i] == '/' || s[i] == '\\') {
      if (i > start) {
        const char *p = match(s + start, i - start);
        if (p) return p;
      }
      start = i + 1;
    }
  }
  return NULL;
}

// Decode the JSON string starting after the opening quote at `*pos`;
// writes its UTF-8 bytes to `out` (at most `cap`), returns the length.
// `*pos` ends after the closing quote.
static size_t json_string(const char *j, size_t n, size_t *pos, char *out, size_t cap) {
  size_t i = *pos, o = 0;
  while (i < n && j[i] != '"') {
    char c = j[i++];
    if (c == '\\' && i < n) {
      char e = j[i++];
      switch (e) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'u': {
          unsigned v = 0;
          for (int k = 0; k < 4 && i < n; k++, i++) {
            char h = j[i];
            v = v * 16 + (h >= '0' && h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
          }
          // Non-ASCII characters cannot spell a pattern's ASCII name: keep
          // them as one opaque byte.
          c = v < 0x80 ? (char)v : '?';
          break;
        }
        default: c = e;  // `"`, `\\`, `/`
      }
    }
    if (o < cap) out[o++] = c;
  }
  *pos = i + 1;
  return o;
}

bool exports_toolgate_plugin_guard_check(exports_toolgate_plugin_guard_borrow_call_t call,
                                         path_guard_string_t *ret) {
  configure();
  toolgate_plugin_types_json_t args;
  toolgate_plugin_types_method_call_arguments(call, &args);
  const char *j = (const char *)args.ptr;
  size_t n = args.len;
  char *buf = malloc(n + 1);
  const char *hit = NULL;
  char *what = NULL;
  size_t what_len = 0;
  for (size_t i = 0; buf && i < n && !hit; i++) {
    if (j[i] != '"') continue;
    size_t pos = i + 1;
    size_t len = json_string(j, n, &pos, buf, n);
    // A string followed by `:` is a key, not a value.
    size_t k = pos;
    while (k < n && (j[k] == ' ' || j[k] == '\n' || j[k] == '\t' || j[k] == '\r')) k++;
    if (!(k < n && j[k] == ':')) {
      hit = denied_in(buf, len);
      if (hit) {
        what = buf;
        what_len = len > 200 ? 200 : len;
      }
    }
    i = pos - 1;
  }
  bool deny = hit != NULL;
  if (deny) {
    const char *head = "path-guard: the arguments name a denied path (`";
    const char *mid = "` matches `";
    const char *tail = "`)";
    size_t total = strlen(head) + what_len + strlen(mid) + strlen(hit) + strlen(tail);
    char *msg = malloc(total + 1);
    if (msg) {
      char *m = msg;
      memcpy(m, head, strlen(head)); m += strlen(head);
      memcpy(m, what, what_len); m += what_len;
      memcpy(m, mid, strlen(mid)); m += strlen(mid);
      memcpy(m, hit, strlen(hit)); m += strlen(hit);
      memcpy(m, tail, strlen(tail)); m += strlen(tail);
      *m = 0;
      path_guard_string_dup_n(ret, msg, total);
      free(msg);
    } else {
      path_guard_string_dup(ret, "path-guard: the arguments name a denied path");
    }
  }
  free(buf);
  toolgate_plugin_types_json_free(&args);
  // A borrowed handle must be dropped before the export returns (the
  // canonical ABI traps otherwise); wit-bindgen's Rust and Python glue do
  // this for you, C does not.
  toolgate_plugin_types_call_drop_borrow(call);
  return deny;
}
