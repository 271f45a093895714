//! The CRD schema pieces the kinds share: schemars `schema_with` and `transform` functions
//! that shape a field's OpenAPI schema as the upstream API declares it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Drops the `default` schemars derives from `#[serde(default)]`: these fields are required
/// (their Rust default only makes decoding lenient) and their empty default would not even
/// pass the field's own validation.
pub(super) fn no_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// A map of resource name to quantity, without k8s-openapi's kilobyte-long Quantity essay.
pub(super) fn quantity_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {"x-kubernetes-int-or-string": true}
    })
}

pub(super) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

pub(super) fn preserve_unknown_array_32(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": 32,
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

/// Conditions as a list map keyed by type, at most 16, as the upstream API declares them.
pub(super) fn condition_list(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let item = generator.subschema_for::<Condition>();
    schemars::json_schema!({
        "type": "array",
        "maxItems": 16,
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"]
    })
}

pub(super) fn string_enum(values: &[&str], default: Option<&str>) -> schemars::Schema {
    let mut schema = schemars::json_schema!({"type": "string", "enum": values});
    if let Some(default) = default {
        schema.insert("default".into(), default.into());
    }
    schema
}
