//! The YAML front matter of a `SKILL.md`: `name` and `description`,
//! read with `yaml-rust2`'s event parser.
//!
//! Why events, not a document: a document loader expands aliases (a
//! "billion laughs" front matter of a few hundred bytes is gigabytes once
//! expanded) and recurses once per nesting level. Here aliases are refused,
//! nesting is counted (at most [`MAX_DEPTH`]), the text is capped
//! ([`MAX_FRONT_MATTER`]), and only the two top-level strings are kept;
//! other keys (`license`, `allowed-tools`, `metadata`, …) are skipped.

use yaml_rust2::parser::{Event, Parser};

/// The front matter's size limit, in bytes.
pub const MAX_FRONT_MATTER: usize = 16 << 10;
/// How deep mappings and sequences may nest in it.
pub const MAX_DEPTH: usize = 16;

/// What a skill says of itself.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
}

/// Splits `text` into its front matter (between a first line `---` and
/// the next line `---` or `...`) and the body after it.
pub fn split(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return Err("does not start with a front matter (a first line `---`, then `name:` and `description:`, then `---`)".into());
    }
    let mut at = first_end + 1;
    while at <= text.len() {
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        let line = text[at..end].trim_end();
        if line == "---" || line == "..." {
            let body = text.get(end + 1..).unwrap_or("");
            return Ok((&text[first_end + 1..at], body));
        }
        if end >= text.len() {
            break;
        }
        at = end + 1;
    }
    Err("its front matter never ends (no closing line `---`)".into())
}

/// Reads `name` and `description` from the front matter's YAML.
pub fn parse(yaml: &str) -> Result<FrontMatter, String> {
    if yaml.len() > MAX_FRONT_MATTER {
        return Err(format!(
            "its front matter is {} bytes, more than the {MAX_FRONT_MATTER} accepted",
            yaml.len()
        ));
    }
    let mut parser = Parser::new_from_str(yaml);
    let mut depth = 0usize;
    let mut top_is_mapping = false;
    // At depth 1 (the top mapping): the key whose value comes next.
    let mut key: Option<String> = None;
    let mut name = None;
    let mut description = None;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| format!("its front matter is not YAML: {e}"))?;
        let at = || format!("line {} of SKILL.md", mark.line() + 1);
        match event {
            Event::StreamEnd => break,
            Event::Alias(_) => {
                return Err(format!(
                    "its front matter uses a YAML alias ({}); write the value out",
                    at()
                ));
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                if depth == 0 {
                    top_is_mapping = matches!(event, Event::MappingStart(..));
                    if !top_is_mapping {
                        return Err("its front matter is not a mapping of keys".into());
                    }
                } else if depth == 1 {
                    match key.as_deref() {
                        None => {
                            return Err(format!(
                                "its front matter has a key that is not a string ({})",
                                at()
                            ));
                        }
                        Some(k @ ("name" | "description")) => {
                            return Err(format!("`{k}` in its front matter must be a string"));
                        }
                        Some(_) => {}
                    }
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "its front matter nests deeper than {MAX_DEPTH} levels ({})",
                        at()
                    ));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    // A nested value of a top-level key ended.
                    key = None;
                }
            }
            Event::Scalar(value, ..) if depth == 1 => match key.take() {
                None => key = Some(value),
                Some(k) => {
                    let slot = match k.as_str() {
                        "name" => &mut name,
                        "description" => &mut description,
                        _ => continue,
                    };
                    if slot.is_some() {
                        return Err(format!("`{k}` appears twice in its front matter"));
                    }
                    *slot = Some(value);
                }
            },
            Event::Scalar(..) if depth == 0 => {
                return Err("its front matter is not a mapping of keys".into());
            }
            _ => {}
        }
    }
    if !top_is_mapping {
        return Err("its front matter is empty (it needs `name:` and `description:`)".into());
    }
    Ok(FrontMatter {
        name: name.ok_or("its front matter has no `name`")?,
        description: description.ok_or("its front matter has no `description`")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_and_description_are_read_and_other_keys_skipped() {
        let text = "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  and merge them.\nlicense: MIT\nmetadata:\n  tags: [a, {b: c}]\n---\n# Body\n";
        let (yaml, body) = split(text).unwrap();
        assert_eq!(body, "# Body\n");
        let fm = parse(yaml).unwrap();
        assert_eq!(fm.name, "pdf");
        assert_eq!(fm.description, "Fill PDF forms and merge them.\n");
    }

    #[test]
    fn the_hostile_and_the_malformed_are_refused_with_why() {
        let cases = [
            ("name: a\n", "no `description`"),
            ("description: x\n", "no `name`"),
            ("name: [a]\ndescription: x\n", "must be a string"),
            ("name: a\nname: b\ndescription: x\n", "twice"),
            ("- a\n- b\n", "not a mapping"),
            ("just text\n", "not a mapping"),
            ("", "empty"),
            ("name: &x a\ndescription: *x\n", "alias"),
            ("name: a\ndescription: \"unterminated\n", "not YAML"),
        ];
        for (yaml, why) in cases {
            let e = parse(yaml).expect_err(yaml);
            assert!(e.contains(why), "{yaml:?}: {e}");
        }
        // A billion laughs is refused at its first alias, before any work.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            bomb += &format!("a{i}: &a{i} [{}]\n", ["*a"; 10].join(", "));
        }
        assert!(parse(&bomb).unwrap_err().contains("alias"));
        // Nesting is counted, not recursed: 20 levels are past ours, 5000
        // past the scanner's own (255), each refused without recursion.
        for levels in [20, 5000] {
            let deep = format!(
                "x: {}{}\nname: a\ndescription: b\n",
                "[".repeat(levels),
                "]".repeat(levels)
            );
            let e = parse(&deep).unwrap_err();
            assert!(
                e.contains("deeper than 16") || e.contains("recursion limit"),
                "{levels}: {e}"
            );
        }
        let big = format!("name: a\ndescription: {}\n", "x".repeat(MAX_FRONT_MATTER));
        assert!(parse(&big).unwrap_err().contains("bytes"));
    }

    #[test]
    fn the_front_matter_must_open_and_close() {
        assert!(
            split("# no front matter\n")
                .unwrap_err()
                .contains("does not start")
        );
        assert!(split("---\nname: a\n").unwrap_err().contains("never ends"));
        let (yaml, body) = split("\u{feff}---\r\nname: a\r\n...\r\nbody").unwrap();
        assert_eq!(yaml, "name: a\r\n");
        assert_eq!(body, "body");
        assert_eq!(split("---\n---").unwrap(), ("", ""));
    }
}
