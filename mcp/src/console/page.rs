//! The console's page: one HTML file, its stylesheet and its script,
//! compiled into the binary (no CDN, no build step — the machines that run
//! toolgate often have no internet).
//!
//! The page shows what tool calls carry, and those are attacker-controlled
//! (a prompt-injected model writes them), so it is served under strict
//! headers: a `Content-Security-Policy` allowing only this server's own
//! script and style (no inline script, no `eval`, nothing framed, no form
//! posting elsewhere), `X-Frame-Options: DENY` for older browsers,
//! `Referrer-Policy: no-referrer`, `X-Content-Type-Options: nosniff` and
//! `Cache-Control: no-store`. The script itself puts every value from a
//! call in the page as text, never as HTML.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::Body;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The policy every console response carries (the API's JSON too: a
/// response opened directly in a tab runs nothing either).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// The page's files, by path: `(content type, body)`.
fn file(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/console" | "/console/" => Some(("text/html; charset=utf-8", INDEX)),
        "/console/console.js" => Some(("text/javascript; charset=utf-8", SCRIPT)),
        "/console/console.css" => Some(("text/css; charset=utf-8", STYLE)),
        _ => None,
    }
}

/// The strict headers, on any console response.
pub fn harden(headers: &mut http::HeaderMap) {
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// The page's file at `path` for a `GET`, if it is one.
pub fn serve(method: &http::Method, path: &str) -> Option<Response<Body>> {
    if method != http::Method::GET && method != http::Method::HEAD {
        return None;
    }
    let (content_type, text) = file(path)?;
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    harden(r.headers_mut());
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_from_elsewhere_and_runs_no_inline_script() {
        assert!(INDEX.contains(r#"<script src="/console/console.js" defer></script>"#));
        // No inline script or handler attribute (the policy would block
        // them: the page would break, not open a hole — but say it here).
        for bad in [
            "<script>",
            " onclick=",
            " onload=",
            " style=",
            "http://",
            "https://",
        ] {
            assert!(!INDEX.contains(bad), "the page holds {bad:?}");
        }
        // The script never parses a value as HTML.
        for bad in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!SCRIPT.contains(bad), "the script uses {bad}");
        }
        assert!(STYLE.contains("pre"));
    }

    #[test]
    fn only_get_serves_the_files() {
        assert!(serve(&http::Method::GET, "/console").is_some());
        assert!(serve(&http::Method::GET, "/console/console.js").is_some());
        assert!(serve(&http::Method::POST, "/console").is_none());
        assert!(serve(&http::Method::GET, "/console/../etc/passwd").is_none());
        let r = serve(&http::Method::GET, "/console/").unwrap();
        let csp = r.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"));
        assert_eq!(r.headers()["x-frame-options"], "DENY");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer");
        assert_eq!(r.headers()["cache-control"], "no-store");
    }
}
