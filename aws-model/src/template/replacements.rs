//! What updating a stack from one template to another would replace or delete: a change to a
//! property the resource type's schema lists as `createOnlyProperties` replaces the resource.

use std::collections::BTreeMap;

use super::Deployment;
use anyhow::{Context, Result};
use serde_json::Value;

/// The `createOnlyProperties` of each resource type: AWS's resource provider schemas, as cfn-lint
/// ships them (`cfnlint/data/schemas`: `providers/<region>.json` maps a type to a schema file in
/// `resources/`).
pub struct ResourceSchemas {
    create_only: BTreeMap<String, Vec<Vec<String>>>,
}

impl ResourceSchemas {
    /// Reads the schemas of `region` from cfn-lint's data directory.
    pub fn load(schemas: &std::path::Path, region: &str) -> Result<Self> {
        let read = |path: std::path::PathBuf| -> Result<Value> {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
        };
        let providers = read(schemas.join("providers").join(format!("{region}.json")))?;
        let mut create_only = BTreeMap::new();
        for (ty, file) in providers.as_object().context("providers is a map")? {
            let Some(file) = file.as_str() else { continue };
            if !ty.starts_with("AWS::") {
                continue;
            }
            let schema = read(schemas.join("resources").join(format!("{file}.json")))?;
            let paths = schema["createOnlyProperties"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(|p| p.strip_prefix("/properties/"))
                .map(|p| p.split('/').map(str::to_owned).collect())
                .collect();
            create_only.insert(ty.clone(), paths);
        }
        Ok(Self { create_only })
    }

    /// The properties of `ty` whose change replaces the resource (JSON pointer parts).
    pub fn create_only(&self, ty: &str) -> Option<&[Vec<String>]> {
        self.create_only.get(ty).map(Vec::as_slice)
    }
}

/// What updating a stack deployed as `old` to `new` would replace or delete, one line per
/// resource: a resource of `old` missing from `new` (or whose condition turns false) is
/// deleted, one whose type changed or whose create-only property changed is replaced. Resources
/// only `new` has are created, which loses nothing.
pub fn replacements(
    old: &Deployment<'_>,
    new: &Deployment<'_>,
    schemas: &ResourceSchemas,
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for (logical, resource) in old.template.resources() {
        let Some(before) = old.properties(logical)? else {
            continue;
        };
        let ty = resource["Type"].as_str().unwrap_or_default();
        let after = match new.template.doc["Resources"].get(logical) {
            None => None,
            Some(r) if r["Type"] != resource["Type"] => {
                found.push(format!(
                    "{logical} ({ty}) is replaced: its type becomes {}",
                    r["Type"]
                ));
                continue;
            }
            Some(_) => new.properties(logical)?,
        };
        let Some(after) = after else {
            found.push(format!("{logical} ({ty}) is deleted"));
            continue;
        };
        let paths = schemas
            .create_only(ty)
            .with_context(|| format!("no schema for {ty}"))?;
        for path in paths {
            let at = |v: &Value| {
                path.iter()
                    .try_fold(v, |v, key| v.get(key))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let (was, becomes) = (at(&before), at(&after));
            if was != becomes {
                found.push(format!(
                    "{logical} ({ty}) is replaced: {} changes from {was} to {becomes}",
                    path.join("/")
                ));
            }
        }
    }
    Ok(found)
}
