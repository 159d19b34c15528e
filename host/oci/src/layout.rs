//! The Wasm OCI artifact layout (what `wkg oci push` writes, the CNCF TAG
//! Runtime "Wasm OCI artifact"): an OCI image manifest, a config of media
//! type [`CONFIG_MEDIA_TYPE`] and exactly one [`LAYER_MEDIA_TYPE`] layer,
//! the component's bytes.

use oci_client::manifest::OciImageManifest;
use serde_json::json;

use crate::budgets::{OCI_MAX_LAYER_BYTES, OCI_MAX_LAYERS};

/// The manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// Whether `bytes` are a WebAssembly component (what a push accepts).
pub fn is_component(bytes: &[u8]) -> bool {
    wasmparser::Parser::is_component(bytes)
}

/// The component layer of a manifest, checked: the config's media type,
/// at most [`OCI_MAX_LAYERS`] layers, exactly one `application/wasm`, a
/// `sha256` digest, a size within [`OCI_MAX_LAYER_BYTES`]. Returns the
/// layer's digest and size; the error says what is wrong.
pub fn component_layer(manifest: &OciImageManifest) -> Result<(String, u64), String> {
    if manifest.layers.len() > OCI_MAX_LAYERS {
        return Err(format!(
            "the manifest lists {} layers; a component is one layer (at most {OCI_MAX_LAYERS} are read)",
            manifest.layers.len()
        ));
    }
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "the manifest's config is {:?}, not {CONFIG_MEDIA_TYPE:?}: not a Wasm component artifact",
            manifest.config.media_type
        ));
    }
    let wasm: Vec<_> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = wasm.as_slice() else {
        return Err(format!(
            "the manifest has {} {LAYER_MEDIA_TYPE} layers; a component artifact has exactly one",
            wasm.len()
        ));
    };
    let hex = layer.digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "the layer's digest {:?} is not sha256:<64 hex digits>",
            layer.digest
        ));
    }
    let size = u64::try_from(layer.size)
        .map_err(|_| format!("the layer's size {} is negative", layer.size))?;
    if size > OCI_MAX_LAYER_BYTES {
        return Err(format!(
            "the component layer is {size} bytes, more than the {OCI_MAX_LAYER_BYTES} allowed"
        ));
    }
    Ok((layer.digest.clone(), size))
}

/// The config and manifest for `component` (its bytes), as `wkg` writes
/// them: the config names the component's top-level imports and exports.
/// Returns (config bytes, manifest bytes).
pub fn artifact(component: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (imports, exports) = world_names(component);
    let layer_digest = super::sha256_digest(component);
    let config = json!({
        "created": now_rfc3339(),
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"exports": exports, "imports": imports, "target": null},
    });
    let config = serde_json::to_vec(&config).expect("a JSON value serializes");
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": super::sha256_digest(&config),
            "size": config.len(),
        },
        "layers": [{
            "mediaType": LAYER_MEDIA_TYPE,
            "digest": layer_digest,
            "size": component.len(),
        }],
    });
    let manifest = serde_json::to_vec(&manifest).expect("a JSON value serializes");
    (config, manifest)
}

/// The component's top-level import and export names (`wasi:cli/…@0.2.0`,
/// `toolgate:plugin/tool@0.2.8`).
fn world_names(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    use wasmparser::{Parser, Payload};
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload {
            Err(_) => break,
            Ok(Payload::ModuleSection { .. } | Payload::ComponentSection { .. }) => depth += 1,
            Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(Payload::ComponentImportSection(s)) if depth == 0 => {
                imports.extend(s.into_iter().flatten().map(|i| i.name.name.to_string()));
            }
            Ok(Payload::ComponentExportSection(s)) if depth == 0 => {
                exports.extend(s.into_iter().flatten().map(|e| e.name.name.to_string()));
            }
            Ok(_) => {}
        }
    }
    (imports, exports)
}

/// Now, as RFC 3339 UTC (`2026-12-02T21:30:00Z`).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    crate::time::rfc3339(secs as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_artifact_is_the_wkg_layout_and_passes_its_own_check() {
        let (config, manifest) = artifact(b"\0asm not really");
        let m: OciImageManifest = serde_json::from_slice(&manifest).unwrap();
        assert_eq!(m.media_type.as_deref(), Some(MANIFEST_MEDIA_TYPE));
        assert_eq!(m.config.digest, crate::sha256_digest(&config));
        let (digest, size) = component_layer(&m).unwrap();
        assert_eq!(digest, crate::sha256_digest(b"\0asm not really"));
        assert_eq!(size, 15);
        let c: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(c["os"], "wasip2");
        assert_eq!(c["layerDigests"][0], digest.as_str());
        assert!(c["created"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn manifests_that_are_not_one_component_are_refused() {
        let (_, manifest) = artifact(b"x");
        let good: OciImageManifest = serde_json::from_slice(&manifest).unwrap();
        let mut many = good.clone();
        many.layers = vec![good.layers[0].clone(); 10_000];
        assert!(component_layer(&many).unwrap_err().contains("10000 layers"));
        let mut two = good.clone();
        two.layers.push(good.layers[0].clone());
        assert!(
            component_layer(&two)
                .unwrap_err()
                .contains("2 application/wasm")
        );
        let mut image = good.clone();
        image.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(component_layer(&image).unwrap_err().contains("not a Wasm"));
        let mut huge = good.clone();
        huge.layers[0].size = 1 << 40;
        assert!(component_layer(&huge).unwrap_err().contains("more than"));
    }
}
