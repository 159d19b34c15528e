//! `resources/*` and `prompts/*` of `toolgate serve`: bridged servers'
//! resources and prompts ([`toolgate::bridge::passthrough`]), for the servers
//! the session's scope may see, with each `resources/read` in the audit
//! record.
//!
//! * **Who sees a server.** The global scope sees every server; a
//!   configured scope (`[scopes.X]`) sees the servers of the tools its view
//!   holds, so the `allow`/`deny` that take a server's tools from a scope
//!   take its resources and prompts too, and a server disabled or not
//!   connected offers nothing.
//! * **Audit.** A resource read is data leaving a server for the client as
//!   much as a tool result is: each one is recorded (kind `resource_read`:
//!   scope, server, the URI as the server knows it, bytes, or the error)
//!   before its contents are returned. A read that cannot be recorded is
//!   refused (fail closed), whatever `on_failure` says for calls.
//!
//! Errors: a name no visible server offers is `-32002` (resource not found)
//! or `-32602` (an unknown prompt), as the specification says; a JSON-RPC
//! error of the server keeps its code, its message prefixed with the
//! server's name; a server that fails or is down is `-32603` naming it.

use std::collections::HashSet;

use rmcp::ErrorData;
use rmcp::model::{ErrorCode, GetPromptResult, JsonObject, ReadResourceResult};
use serde_json::json;

use toolgate::bridge::passthrough::PassError;
use toolgate::host::Toolgate;

/// JSON-RPC code of a resource no server offers (the specification's).
pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);

/// Which bridged servers `scope` may see.
pub fn visible(host: &Toolgate, scope: &str) -> impl Fn(&str) -> bool + Sync + use<> {
    let everything = host.registry().resolved_name(scope).is_empty();
    let servers: HashSet<String> = if everything {
        HashSet::new()
    } else {
        host.generation_for(scope)
            .tools
            .values()
            .filter_map(|e| e.body.mcp_server().map(str::to_string))
            .collect()
    };
    move |server: &str| everything || servers.contains(server)
}

fn error(e: PassError, not_found: ErrorCode) -> ErrorData {
    match e {
        PassError::NotFound(m) => ErrorData::new(not_found, m, None),
        PassError::Refused { code, message } => ErrorData::new(code, message, None),
        PassError::Server(m) | PassError::TooLarge(m) => ErrorData::internal_error(m, None),
    }
}

/// `resources/read`, recorded.
pub async fn read(
    host: &Toolgate,
    scope: &str,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let Some(bridge) = host.bridge() else {
        return Err(ErrorData::new(
            RESOURCE_NOT_FOUND,
            format!("no MCP server offers the resource {uri}"),
            None,
        ));
    };
    let visible = visible(host, scope);
    let read = bridge.read_resource(uri, &visible).await;
    if let Some(audit) = host.audit() {
        let fields = match &read {
            Ok(r) => {
                json!({"scope": scope, "server": r.server, "uri": r.raw_uri, "bytes": r.bytes})
            }
            Err(e) => json!({"scope": scope, "uri": uri, "error": e.to_string()}),
        };
        if let Err(e) = audit.event("resource_read", fields) {
            tracing::error!(error = %e, uri, "a resource read was not recorded: refused");
            return Err(ErrorData::internal_error(
                format!(
                    "the resource read could not be recorded in the audit record ({e}); refused"
                ),
                None,
            ));
        }
    }
    match read {
        Ok(r) => {
            tracing::debug!(server = %r.server, uri = %r.raw_uri, bytes = r.bytes, "resource read");
            Ok(r.result)
        }
        Err(e) => Err(error(e, RESOURCE_NOT_FOUND)),
    }
}

/// `prompts/get`.
pub async fn get_prompt(
    host: &Toolgate,
    scope: &str,
    name: &str,
    arguments: Option<JsonObject>,
) -> Result<GetPromptResult, ErrorData> {
    let Some(bridge) = host.bridge() else {
        return Err(ErrorData::invalid_params(
            format!("no MCP server offers the prompt `{name}`"),
            None,
        ));
    };
    let visible = visible(host, scope);
    bridge
        .get_prompt(name, arguments, &visible)
        .await
        .map_err(|e| error(e, ErrorCode::INVALID_PARAMS))
}
