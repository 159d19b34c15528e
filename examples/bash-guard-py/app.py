"""A guard for the `bash` tool that denies destructive command lines.

It parses the command line the way a POSIX shell splits it -- quotes,
escapes, `&&`, `||`, `;`, `|`, `&`, newlines, `( subshells )`, `{ groups; }`,
`$( command substitutions )`, backticks, `<( process substitutions )` --
and judges every simple command it finds, however deeply nested, instead
of matching substrings: `echo "rm -rf /"` is harmless, `true && (cd / ;
sudo rm -rf --no-preserve-root /)` is not.

Denied:
  * `rm` recursive on `/`, `/*`, `~`, `$HOME` or a top-level system directory;
  * `mkfs*`, `mke2fs`, `wipefs`, `fdisk`, `sfdisk`, `parted`, `shred` on a device;
  * writes to a block device: `dd of=/dev/sda`, `> /dev/nvme0n1`, `tee /dev/sdb`,
    `cp x /dev/vda`;
  * a download piped into a shell (`curl … | sh`, `wget -O- … | sudo bash`);
  * a shell or `eval` running downloaded text (`sh -c "$(curl …)"`,
    `bash <(curl …)`, `eval "$(wget -qO- …)"`);
  * a fork bomb (`:(){ :|:& };:`).

Settings (the `vars` of `[plugins.bash-guard]`):
  TOOLS      comma-separated tool names to guard (default: `bash`)
  ARGUMENT   JSON pointer of the command line in the arguments (default: `/command`)
"""

import json
import os

from wit_world import exports
from wit_world.imports import types


_settings = None


def settings():
    """(tools, argument pointer), read on the first call: componentize-py
    runs the module's top level at build time, when the operator's
    settings are not there yet."""
    global _settings
    if _settings is None:
        tools = {t.strip() for t in os.environ.get("TOOLS", "bash").split(",") if t.strip()}
        _settings = (tools, os.environ.get("ARGUMENT", "/command"))
    return _settings

# Operators that end a simple command.
SEPARATORS = {"&&", "||", ";", "|", "&", "\n", "|&", ";;"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish"}
FETCHERS = {"curl", "wget", "fetch", "aria2c", "http", "https", "nc", "ncat"}
# Commands that run their arguments as another command.
WRAPPERS = {"sudo", "doas", "env", "nohup", "nice", "time", "command", "exec",
            "builtin", "timeout", "stdbuf", "ionice", "chroot", "xargs", "watch",
            "setsid", "unbuffer", "caffeinate"}
FORMATTERS = {"mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "cfdisk",
              "parted", "sgdisk", "gdisk"}
SYSTEM_DIRS = {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32",
               "/lib64", "/opt", "/proc", "/root", "/sbin", "/srv", "/sys",
               "/usr", "/var", "~", "$HOME", "${HOME}"}
BLOCK_DEVICE_PREFIXES = ("/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme",
                         "/dev/mmcblk", "/dev/disk/", "/dev/md", "/dev/dm-",
                         "/dev/mapper/", "/dev/loop", "/dev/sr")
MAX_DEPTH = 16


class Word:
    """One shell word: its text with quotes removed, and the command lines
    substituted into it (`$(...)`, backticks, `<(...)`)."""

    __slots__ = ("text", "subs", "quoted")

    def __init__(self):
        self.text = []
        self.subs = []
        self.quoted = False

    def value(self):
        return "".join(self.text)


class ParseError(Exception):
    pass


def _balanced(src, i, open_ch, close_ch):
    """Index just past the `close_ch` matching the `open_ch` before `i`,
    skipping quotes; raises if it is missing."""
    depth = 1
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = src.find("'", i + 1)
            if end < 0:
                raise ParseError("unterminated single quote")
            i = end + 1
            continue
        if c == '"':
            i = _skip_double(src, i + 1)
            continue
        if c == "`":
            end = src.find("`", i + 1)
            if end < 0:
                raise ParseError("unterminated backtick")
            i = end + 1
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ParseError(f"missing `{close_ch}`")


def _skip_double(src, i):
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if c == "$" and src.startswith("$(", i):
            i = _balanced(src, i + 2, "(", ")")
            continue
        if c == "`":
            end = src.find("`", i + 1)
            if end < 0:
                raise ParseError("unterminated backtick")
            i = end + 1
            continue
        i += 1
    raise ParseError("unterminated double quote")


def tokenize(src):
    """Split a command line into words (`Word`) and operators (`str`)."""
    tokens = []
    word = None
    i = 0
    n = len(src)

    def flush():
        nonlocal word
        if word is not None:
            tokens.append(word)
            word = None

    def current():
        nonlocal word
        if word is None:
            word = Word()
        return word

    while i < n:
        c = src[i]
        if c in " \t\r":
            flush()
            i += 1
        elif c == "#" and word is None:
            end = src.find("\n", i)
            i = n if end < 0 else end
        elif c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                i += 2
                continue
            current().text.append(src[i + 1 : i + 2])
            i += 2
        elif c == "'":
            end = src.find("'", i + 1)
            if end < 0:
                raise ParseError("unterminated single quote")
            w = current()
            w.text.append(src[i + 1 : end])
            w.quoted = True
            i = end + 1
        elif c == '"':
            w = current()
            w.quoted = True
            i += 1
            while True:
                if i >= n:
                    raise ParseError("unterminated double quote")
                d = src[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and src[i + 1] in '"\\$`\n':
                    w.text.append(src[i + 1])
                    i += 2
                elif d == "$" and src.startswith("$(", i) and not src.startswith("$((", i):
                    end = _balanced(src, i + 2, "(", ")")
                    w.subs.append(src[i + 2 : end - 1])
                    w.text.append("$(…)")
                    i = end
                elif d == "`":
                    end = src.find("`", i + 1)
                    if end < 0:
                        raise ParseError("unterminated backtick")
                    w.subs.append(src[i + 1 : end])
                    w.text.append("$(…)")
                    i = end + 1
                else:
                    w.text.append(d)
                    i += 1
        elif c == "$" and src.startswith("$((", i):
            end = _balanced(src, i + 3, "(", ")")
            current().text.append(src[i:end + 1])
            i = end + 1
        elif c == "$" and src.startswith("$(", i):
            end = _balanced(src, i + 2, "(", ")")
            w = current()
            w.subs.append(src[i + 2 : end - 1])
            w.text.append("$(…)")
            i = end
        elif c == "`":
            end = src.find("`", i + 1)
            if end < 0:
                raise ParseError("unterminated backtick")
            w = current()
            w.subs.append(src[i + 1 : end])
            w.text.append("$(…)")
            i = end + 1
        elif c in "<>" and src.startswith("(", i + 1):
            # Process substitution: its command line runs too.
            end = _balanced(src, i + 2, "(", ")")
            w = current()
            w.subs.append(src[i + 2 : end - 1])
            w.text.append("/dev/fd/63")
            i = end
        elif c in "&|;\n":
            flush()
            two = src[i : i + 2]
            if two in ("&&", "||", ";;", "|&"):
                tokens.append(two)
                i += 2
            elif two == "&>":
                tokens.append(">")
                i += 2
            else:
                tokens.append(c)
                i += 1
        elif c in "()":
            flush()
            tokens.append(c)
            i += 1
        elif c in "<>":
            # A redirection operator; a file-descriptor number before it
            # (`2>`) belongs to it, not to the word before.
            if word is not None and word.value().isdigit() and not word.quoted:
                word = None
            flush()
            j = i + 1
            while j < n and src[j] in "<>&|":
                j += 1
            tokens.append(src[i:j])
            i = j
        else:
            current().text.append(c)
            i += 1
    flush()
    return tokens


class Command:
    """A simple command: its words, its output redirections, and which
    pipeline it belongs to."""

    __slots__ = ("words", "writes", "pipeline", "position")

    def __init__(self, pipeline, position):
        self.words = []
        self.writes = []
        self.pipeline = pipeline
        self.position = position


def commands(tokens):
    """Group tokens into simple commands. Subshell and group brackets only
    separate commands: what runs inside them is judged like the rest."""
    out = []
    pipeline = 0
    position = 0
    cmd = Command(pipeline, position)
    pending_redirect = None
    for t in tokens:
        if isinstance(t, Word):
            if pending_redirect is not None:
                if ">" in pending_redirect:
                    cmd.writes.append(t)
                else:
                    cmd.words.append(t) if t.subs else None
                pending_redirect = None
            elif not cmd.words and t.value() in ("{", "}", "!"):
                continue
            else:
                cmd.words.append(t)
            continue
        if t in ("<", "<<", "<<<", ">", ">>", ">|", "<>", ">&", "<&", "&>>"):
            pending_redirect = t
            continue
        if t in (">&", "<&"):
            continue
        # An operator ends the command.
        if cmd.words or cmd.writes:
            out.append(cmd)
        if t in ("|", "|&"):
            position += 1
        elif t in ("(", ")"):
            pass
        else:
            pipeline += 1
            position = 0
        cmd = Command(pipeline, position)
        pending_redirect = None
    if cmd.words or cmd.writes:
        out.append(cmd)
    return out


def basename(word):
    return word.rsplit("/", 1)[-1]


def unwrap(words):
    """Skip `sudo`, `env X=1`, `timeout 5`, `nice -n 5` and the like: the
    command that really runs, with its arguments."""
    i = 0
    while i < len(words):
        w = words[i].value()
        name = basename(w)
        if "=" in w and not w.startswith("=") and name == w and w.split("=", 1)[0].isidentifier():
            i += 1  # VAR=value prefix
            continue
        if name in WRAPPERS:
            i += 1
            # Skip the wrapper's options and their values.
            while i < len(words):
                v = words[i].value()
                if v == "--":
                    i += 1
                    break
                if v.startswith("-"):
                    i += 1
                    if name in ("sudo", "doas", "nice", "ionice", "timeout", "stdbuf", "chroot", "watch") \
                            and v in ("-u", "-g", "-n", "-c", "-s", "-k", "-o", "-e", "-i", "-C", "-p"):
                        i += 1
                    continue
                if name == "timeout" and (v[:1].isdigit()):
                    i += 1
                    continue
                if name == "env" and "=" in v:
                    i += 1
                    continue
                if name == "chroot":
                    i += 1
                break
            continue
        return words[i:]
    return []


def is_block_device(path):
    return path.startswith(BLOCK_DEVICE_PREFIXES)


def rm_reason(args):
    recursive = False
    no_preserve = False
    targets = []
    options_done = False
    for w in args:
        v = w.value()
        if not options_done and v == "--":
            options_done = True
        elif not options_done and v.startswith("--"):
            if v == "--recursive":
                recursive = True
            if v == "--no-preserve-root":
                no_preserve = True
        elif not options_done and v.startswith("-") and len(v) > 1:
            if "r" in v or "R" in v:
                recursive = True
        else:
            targets.append(v)
    if not recursive:
        return None
    if no_preserve:
        return "`rm --no-preserve-root` removes the root file system"
    for t in targets:
        norm = t.rstrip("/") or "/"
        if norm in SYSTEM_DIRS or norm in ("/*", "~/*", "$HOME/*", "*", ".", ".."):
            return f"`rm -r {t}` removes {'everything under ' + t if t.endswith('*') else t}"
        if norm.startswith("/") and norm.count("/") == 1 and norm.rstrip("*") != norm:
            return f"`rm -r {t}` removes top-level directories"
    return None


def judge(cmd, all_cmds, depth):
    """The reason to deny one simple command, or None."""
    for w in cmd.writes:
        if is_block_device(w.value()):
            return f"writes to the block device {w.value()}"
    words = unwrap(cmd.words)
    if not words:
        return None
    name = basename(words[0].value())
    args = words[1:]
    values = [a.value() for a in args]

    if name == "rm":
        r = rm_reason(args)
        if r:
            return r
    if name in FORMATTERS or name.startswith("mkfs.") or name.startswith("mke2fs"):
        return f"`{name}` formats or repartitions a disk"
    if name == "shred" and any(is_block_device(v) for v in values):
        return "`shred` on a block device destroys it"
    if name == "dd":
        for v in values:
            if v.startswith("of=") and is_block_device(v[3:]):
                return f"`dd` writes to the block device {v[3:]}"
    if name in ("tee", "cp", "mv", "cat", "install") and any(
            is_block_device(v) for v in (values if name == "tee" else values[-1:])):
        return f"`{name}` writes to a block device"
    # A download piped into an interpreter.
    if cmd.position > 0 and (name in SHELLS or name in ("python", "python3", "perl", "ruby", "node")):
        if "-c" not in values:
            for other in all_cmds:
                if other.pipeline == cmd.pipeline and other.position < cmd.position:
                    w = unwrap(other.words)
                    if w and basename(w[0].value()) in FETCHERS:
                        return f"pipes a download (`{basename(w[0].value())}`) into `{name}`"
    # A shell or eval running text: judge that text as a command line, and
    # refuse downloaded text outright.
    script = None
    if name in SHELLS and "-c" in values:
        idx = values.index("-c")
        if idx + 1 < len(args):
            script = args[idx + 1]
    elif name == "eval" and args:
        script = args[0]
    elif name in SHELLS:
        # `bash <(curl …)` or `bash /dev/stdin <<< "$(curl …)"`.
        for a in args:
            if a.subs and any(_fetches(s) for s in a.subs):
                return f"`{name}` runs a downloaded script"
    if script is not None:
        if any(_fetches(s) for s in script.subs):
            return f"`{name}` runs a downloaded script"
        r = check_line(script.value(), depth + 1) if not script.subs else None
        if r:
            return r
    if name == "source" or name == ".":
        for a in args:
            if a.subs and any(_fetches(s) for s in a.subs):
                return "sources a downloaded script"
    return None


def _fetches(line):
    try:
        for c in commands(tokenize(line)):
            w = unwrap(c.words)
            if w and basename(w[0].value()) in FETCHERS:
                return True
    except ParseError:
        return False
    return False


def check_line(line, depth=0):
    """The reason to deny a command line, or None."""
    if depth > MAX_DEPTH:
        return "the command line nests too deeply to be judged"
    compact = line.replace(" ", "")
    if ":(){" in compact and ":|:" in compact:
        return "a fork bomb"
    try:
        tokens = tokenize(line)
    except ParseError as e:
        return f"the command line cannot be parsed ({e}); a shell would reject it too"
    cmds = commands(tokens)
    for cmd in cmds:
        r = judge(cmd, cmds, depth)
        if r:
            return r
        for w in cmd.words + cmd.writes:
            for sub in w.subs:
                r = check_line(sub, depth + 1)
                if r:
                    return r
    return None


class Guard(exports.Guard):
    def check(self, call: types.Call):
        tools, argument = settings()
        if call.tool_name() not in tools:
            return None
        text = call.argument(argument)
        if text is None:
            return None
        line = json.loads(text)
        if not isinstance(line, str):
            return None
        reason = check_line(line)
        if reason is None:
            return None
        return f"bash-guard: {reason}"
