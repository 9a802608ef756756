//! The copy of an AWS Health event that one cluster receives: a Health scheduled change names
//! instances of possibly several clusters, and no tenant may see another tenant's instance ids.
//! Only the values that change are parsed; the rest is copied as the original JSON text.

use std::{borrow::Cow, collections::HashSet, fmt};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{InstanceId, Malformed};

/// Writes the copy of a Health event that one cluster receives: the same envelope and detail,
/// with `detail.affectedEntities` reduced to that cluster's instances (ARNs rewritten to the bare
/// ids Karpenter matches, each instance once) and `resources` set to exactly those ids.
///
/// `body` must be an event [`classify`](super::classify) routed as a scheduled change. Only the three values that
/// change are parsed; everything else (the description, timestamps, fields AWS adds later) is
/// copied as the original JSON text, so a split costs little more than a scan of the body.
pub fn health_body_for(body: &str, instances: &[InstanceId]) -> Result<String, Malformed> {
    let malformed = |e: serde_json::Error| Malformed::new(e.to_string());
    let event: Object<'_, EventMember<'_>> = serde_json::from_str(body).map_err(malformed)?;
    let wanted: HashSet<&str> = instances.iter().map(InstanceId::as_str).collect();
    let mut ids: Vec<InstanceId> = Vec::with_capacity(instances.len());

    // The detail first: `resources` lists the ids it keeps, and may come before it.
    let mut detail_out = Vec::with_capacity(body.len());
    let mut entities_seen = false;
    for (_, member) in &event.0 {
        let EventMember::Detail(detail) = member else {
            continue;
        };
        if !detail_out.is_empty() {
            return Err(Malformed::new("Health event with two detail fields"));
        }
        detail_out.push(b'{');
        for (key, member) in &detail.0 {
            push_key(&mut detail_out, key.as_str());
            match member {
                DetailMember::Entities(entities) => {
                    entities_seen = true;
                    push_entities(&mut detail_out, entities, &wanted, &mut ids);
                }
                DetailMember::Text(text) => detail_out.extend_from_slice(text.get().as_bytes()),
            }
            detail_out.push(b',');
        }
        close(&mut detail_out, b'}');
    }
    if !entities_seen {
        return Err(Malformed::new(
            "Health event without detail.affectedEntities",
        ));
    }

    // Then the event, member by member in the original order; `resources` is added if missing.
    let mut out = Vec::with_capacity(body.len());
    let mut resources_written = false;
    out.push(b'{');
    for (key, member) in &event.0 {
        match member {
            EventMember::Text(_) if key.as_str() == "resources" => {
                if resources_written {
                    continue;
                }
                resources_written = true;
                push_resources(&mut out, &ids);
            }
            EventMember::Text(text) => {
                push_key(&mut out, key.as_str());
                out.extend_from_slice(text.get().as_bytes());
            }
            EventMember::Detail(_) => {
                push_key(&mut out, key.as_str());
                out.extend_from_slice(&detail_out);
            }
        }
        out.push(b',');
    }
    if !resources_written {
        push_resources(&mut out, &ids);
        out.push(b',');
    }
    close(&mut out, b'}');
    // Every piece is either original (valid UTF-8) text, a key serde_json escaped, or an id.
    String::from_utf8(out).map_err(|e| Malformed::new(e.to_string()))
}

/// Writes the entities naming one of `wanted`, each instance once, with `entityValue` bare.
fn push_entities(
    out: &mut Vec<u8>,
    entities: &[Members<'_>],
    wanted: &HashSet<&str>,
    ids: &mut Vec<InstanceId>,
) {
    out.push(b'[');
    for entity in entities {
        let id = entity
            .0
            .iter()
            .find(|(key, _)| key.as_str() == "entityValue")
            .and_then(|(_, value)| serde_json::from_str::<Cow<'_, str>>(value.get()).ok())
            .and_then(|value| InstanceId::parse(&value));
        let Some(id) = id else { continue };
        if !wanted.contains(id.as_str()) || ids.contains(&id) {
            continue;
        }
        out.push(b'{');
        for (key, value) in &entity.0 {
            push_key(out, key.as_str());
            if key.as_str() == "entityValue" {
                push_id(out, &id);
            } else {
                out.extend_from_slice(value.get().as_bytes());
            }
            out.push(b',');
        }
        close(out, b'}');
        out.push(b',');
        ids.push(id);
    }
    close(out, b']');
}

fn push_resources(out: &mut Vec<u8>, ids: &[InstanceId]) {
    out.extend_from_slice(br#""resources":["#);
    for id in ids {
        push_id(out, id);
        out.push(b',');
    }
    close(out, b']');
}

/// Replaces a trailing comma (if any) with `bracket`.
fn close(out: &mut Vec<u8>, bracket: u8) {
    if out.last() == Some(&b',') {
        out.pop();
    }
    out.push(bracket);
}

fn push_key(out: &mut Vec<u8>, key: &str) {
    serde_json::to_writer(&mut *out, key).expect("writing to a Vec cannot fail");
    out.push(b':');
}

/// Instance ids are `i-` and hex digits: nothing to escape.
fn push_id(out: &mut Vec<u8>, id: &InstanceId) {
    out.push(b'"');
    out.extend_from_slice(id.as_str().as_bytes());
    out.push(b'"');
}

/// A JSON object's members in their original order. `M` decides, key by key, what is parsed
/// further; everything else stays unparsed JSON text. One pass over the body builds the whole tree.
struct Object<'a, M>(Vec<(Key<'a>, M)>);

/// An object whose members are all left as text (an affected entity).
type Members<'a> = Object<'a, &'a RawValue>;

/// A member of the Health event being split: its `detail` is parsed, the rest kept as text.
enum EventMember<'a> {
    Text(&'a RawValue),
    Detail(Object<'a, DetailMember<'a>>),
}

/// A member of the detail: `affectedEntities` is parsed, the rest kept as text.
enum DetailMember<'a> {
    Text(&'a RawValue),
    Entities(Vec<Members<'a>>),
}

/// Reads the value of the member named `key` from `map`.
trait Member<'de>: Sized {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error>;
}

impl<'de> Member<'de> for &'de RawValue {
    fn read<A: serde::de::MapAccess<'de>>(_: &str, map: &mut A) -> Result<Self, A::Error> {
        map.next_value()
    }
}

impl<'de> Member<'de> for EventMember<'de> {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error> {
        Ok(match key {
            "detail" => EventMember::Detail(map.next_value()?),
            _ => EventMember::Text(map.next_value()?),
        })
    }
}

impl<'de> Member<'de> for DetailMember<'de> {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error> {
        Ok(match key {
            "affectedEntities" => DetailMember::Entities(map.next_value()?),
            _ => DetailMember::Text(map.next_value()?),
        })
    }
}

/// An object key, borrowed from the input unless it had escapes to undo.
struct Key<'a>(Cow<'a, str>);

impl Key<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(Visitor)
    }
}

impl<'de: 'a, 'a, M: Member<'de>> Deserialize<'de> for Object<'a, M> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<M>(std::marker::PhantomData<M>);
        impl<'de, M: Member<'de>> serde::de::Visitor<'de> for Visitor<M> {
            type Value = Object<'de, M>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let member = M::read(key.as_str(), &mut map)?;
                    members.push((key, member));
                }
                Ok(Object(members))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    use crate::event::{
        Classified, classify,
        tests::{fixture, ids},
    };

    #[test]
    fn health_split_keeps_only_the_clusters_instances_as_bare_ids() {
        let original = fixture("health-instance-retirement-arn-entity.json").replace(
            r#""affectedEntities": ["#,
            r#""affectedEntities": [
              {"entityValue": "i-0bbbbbbbbbbbbbbbb", "status": "PENDING"},
              {"entityValue": "i-0aaaaaaaaaaaaaaaa"},"#,
        );
        let mine = ids(&["i-1234567890abcdef0", "i-0aaaaaaaaaaaaaaaa"]);
        let copy: Value =
            serde_json::from_str(&health_body_for(&original, &mine).unwrap()).unwrap();
        let original: Value = serde_json::from_str(&original).unwrap();

        // In the original's entity order, whatever order the cluster's instances were given in.
        let in_event_order = ids(&["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"]);
        let entities = copy["detail"]["affectedEntities"].as_array().unwrap();
        let values: Vec<&str> = entities
            .iter()
            .map(|e| e["entityValue"].as_str().unwrap())
            .collect();
        assert_eq!(values, ["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"]);
        assert_eq!(
            entities[1]["status"], "PENDING",
            "entity fields other than the id are kept"
        );
        assert_eq!(
            copy["resources"],
            serde_json::json!(["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"])
        );
        assert!(
            !copy.to_string().contains("i-0bbbbbbbbbbbbbbbb"),
            "another cluster's instance leaked"
        );

        // Everything else is the original, field for field.
        for key in [
            "version",
            "id",
            "detail-type",
            "source",
            "account",
            "time",
            "region",
        ] {
            assert_eq!(copy[key], original[key], "{key}");
        }
        let (mut cd, mut od) = (copy["detail"].clone(), original["detail"].clone());
        cd.as_object_mut().unwrap().remove("affectedEntities");
        od.as_object_mut().unwrap().remove("affectedEntities");
        assert_eq!(cd, od);
        // And Karpenter would route the copy to exactly these instances.
        match classify(&copy.to_string()).unwrap() {
            Classified::Route(i) => assert_eq!(i.instances, in_event_order),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn health_split_lists_a_repeated_entity_once() {
        let original = fixture("health-scheduled-change-bare-id.json").replace(
            r#""affectedEntities": ["#,
            r#""affectedEntities": [{"entityValue": "i-12345678"},"#,
        );
        let copy: Value =
            serde_json::from_str(&health_body_for(&original, &ids(&["i-12345678"])).unwrap())
                .unwrap();
        assert_eq!(
            copy["detail"]["affectedEntities"].as_array().unwrap().len(),
            1
        );
        assert_eq!(copy["resources"], serde_json::json!(["i-12345678"]));
    }

    #[test]
    fn health_split_copies_untouched_text_verbatim_and_reads_escaped_keys() {
        // An escaped key still names the field, escapes elsewhere survive byte for byte, and an
        // event without `resources` gets one.
        let original = r#"{"version":"0","id":"x","detail-type":"AWS Health Event","source":"aws.health","account":"1","time":"2026-01-01T00:00:00Z","region":"us-east-1","d\u0065tail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventDescription":[{"latestDescription":"line\none \"q\" \u00e9"}],"affectedEntities":[{"entityValue":"i-0aaaaaaaaaaaaaaaa","tags":{}},{"entityValue":"i-0bbbbbbbbbbbbbbbb"}]}}"#;
        assert!(matches!(classify(original), Ok(Classified::Route(_))));
        let copy = health_body_for(original, &ids(&["i-0bbbbbbbbbbbbbbbb"])).unwrap();
        assert!(copy.contains(r#""latestDescription":"line\none \"q\" \u00e9""#));
        let copy: Value = serde_json::from_str(&copy).unwrap();
        assert_eq!(
            copy["detail"]["affectedEntities"],
            serde_json::json!([{"entityValue": "i-0bbbbbbbbbbbbbbbb"}])
        );
        assert_eq!(
            copy["resources"],
            serde_json::json!(["i-0bbbbbbbbbbbbbbbb"])
        );
    }

    #[test]
    fn health_split_keeps_the_members_in_their_original_order() {
        // `resources` before `detail`, as AWS Health writes it: it stays there.
        let original = fixture("health-instance-retirement-arn-entity.json").replacen(
            r#""detail":"#,
            r#""resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"], "detail":"#,
            1,
        );
        let keys = |body: &str| -> Vec<String> {
            let members: Members<'_> = serde_json::from_str(body).unwrap();
            members
                .0
                .iter()
                .map(|(k, _)| k.as_str().to_owned())
                .collect()
        };
        let copy = health_body_for(&original, &ids(&["i-1234567890abcdef0"])).unwrap();
        assert_eq!(keys(&copy), keys(&original));
        let twice = original.replacen('{', r#"{"detail":{"affectedEntities":[]},"#, 1);
        assert!(health_body_for(&twice, &ids(&["i-1234567890abcdef0"])).is_err());
    }

    #[test]
    fn health_split_without_entities_is_malformed() {
        let no_entities = fixture("health-scheduled-change-bare-id.json")
            .replace(r#""affectedEntities""#, r#""otherEntities""#);
        assert!(health_body_for(&no_entities, &ids(&["i-12345678"])).is_err());
        assert!(health_body_for(r#"{"detail":{"affectedEntities":"x"}}"#, &[]).is_err());
        assert!(health_body_for("[1]", &[]).is_err());
    }
}
