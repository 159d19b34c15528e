//! JSON pointers (RFC 6901), built only when an error needs one.
//!
//! Paths are kept as parent links (an arena of segments) while walking, so a
//! deep walk costs one small entry per level instead of one string per level;
//! the string is assembled only for a reported error.

/// One step of a path: an object member or an array index.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// Appends `/segment` to `out`, escaping `~` and `/` as RFC 6901 requires.
pub(crate) fn push_segment(out: &mut String, segment: Segment<'_>) {
    out.push('/');
    match segment {
        Segment::Key(key) => {
            for c in key.chars() {
                match c {
                    '~' => out.push_str("~0"),
                    '/' => out.push_str("~1"),
                    c => out.push(c),
                }
            }
        }
        Segment::Index(i) => {
            use std::fmt::Write;
            let _ = write!(out, "{i}");
        }
    }
}

/// Builds a pointer from segments listed root first.
pub(crate) fn from_segments<'a>(segments: impl IntoIterator<Item = Segment<'a>>) -> String {
    let mut out = String::new();
    for segment in segments {
        push_segment(&mut out, segment);
    }
    out
}

/// An arena of path entries linked to their parent; entry 0 is the root.
#[derive(Debug)]
pub(crate) struct PathArena<'a> {
    entries: Vec<(u32, Option<Segment<'a>>, u32)>,
}

/// Index of the root path in every [`PathArena`].
pub(crate) const ROOT: u32 = 0;

impl<'a> PathArena<'a> {
    pub(crate) fn new() -> Self {
        Self::with_capacity(1)
    }

    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut entries = Vec::with_capacity(capacity.max(1));
        entries.push((ROOT, None, 0));
        PathArena { entries }
    }

    /// Adds `parent/segment` and returns its index.
    pub(crate) fn child(&mut self, parent: u32, segment: Segment<'a>) -> u32 {
        let depth = self.depth(parent) + 1;
        let index = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
        self.entries.push((parent, Some(segment), depth));
        index
    }

    /// Number of segments from the root to `path`.
    pub(crate) fn depth(&self, path: u32) -> u32 {
        self.entries.get(path as usize).map_or(0, |e| e.2)
    }

    /// The JSON pointer of `path`.
    pub(crate) fn pointer(&self, path: u32) -> String {
        let mut segments = Vec::new();
        let mut at = path;
        while let Some(&(parent, Some(segment), _)) = self.entries.get(at as usize) {
            segments.push(segment);
            at = parent;
        }
        from_segments(segments.into_iter().rev())
    }

    /// The JSON pointer of `path` followed by one more segment.
    pub(crate) fn pointer_with(&self, path: u32, segment: Segment<'_>) -> String {
        let mut out = self.pointer(path);
        push_segment(&mut out, segment);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_tilde_and_slash() {
        let p = from_segments([Segment::Key("a/b"), Segment::Key("m~n"), Segment::Index(3)]);
        assert_eq!(p, "/a~1b/m~0n/3");
    }

    #[test]
    fn arena_builds_pointers_from_parent_links() {
        let mut arena = PathArena::new();
        let a = arena.child(ROOT, Segment::Key("a"));
        let b = arena.child(a, Segment::Index(2));
        assert_eq!(arena.pointer(ROOT), "");
        assert_eq!(arena.pointer(b), "/a/2");
        assert_eq!(arena.depth(b), 2);
        assert_eq!(arena.pointer_with(a, Segment::Key("")), "/a/");
    }
}
