//! Server-sent events, as both APIs stream an answer: events separated by
//! a blank line, each `event:` and `data:` lines (several `data:` lines
//! are one value, joined by newlines), `:` comments ignored.

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub event: Option<String>,
    pub data: String,
}

/// The events of a whole body. An event cut before its blank line is
/// still returned (the reader decides from the events whether the stream
/// reached its end).
pub fn events(body: &str) -> Vec<Event> {
    let mut out = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Vec<&str> = Vec::new();
    let flush = |event: &mut Option<String>, data: &mut Vec<&str>, out: &mut Vec<Event>| {
        if event.is_some() || !data.is_empty() {
            out.push(Event {
                event: event.take(),
                data: data.join("\n"),
            });
            data.clear();
        }
    };
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            flush(&mut event, &mut data, &mut out);
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => data.push(value),
            _ => {}
        }
    }
    flush(&mut event, &mut data, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_lines_comments_and_a_cut_last_event() {
        let body = ": keep-alive\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\ndata: one\ndata: two\n\ndata: [DONE";
        assert_eq!(
            events(body),
            vec![
                Event {
                    event: Some("a".into()),
                    data: "{\"x\":1}".into()
                },
                Event {
                    event: None,
                    data: "one\ntwo".into()
                },
                Event {
                    event: None,
                    data: "[DONE".into()
                },
            ]
        );
        assert!(events("").is_empty());
    }
}
