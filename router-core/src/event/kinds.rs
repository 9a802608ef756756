//! Kinds: which of the five interruption kinds a cluster takes.
//!
//! A tenant stack chooses them (tenant.yaml's `EventKinds`, default all five) and writes the
//! choice on its queue as the tag [`crate::tenancy::KINDS_TAG`], so the router reads it with the
//! queue's other tags, in the call that already tells a tenant queue from a look-alike. A copy of
//! a kind its cluster declined is counted, never sent, dead-lettered or paged.

use std::fmt;

use super::Kind;

/// A set of [`Kind`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kinds(u8);

impl Kinds {
    /// What a tenant takes unless it chose otherwise.
    pub const ALL: Kinds = Kinds((1 << Kind::ALL.len()) - 1);
    pub const NONE: Kinds = Kinds(0);

    fn bit(kind: Kind) -> u8 {
        let at = Kind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("Kind::ALL lists every kind");
        1 << at
    }

    pub fn contains(self, kind: Kind) -> bool {
        self.0 & Self::bit(kind) != 0
    }

    pub fn with(self, kind: Kind) -> Kinds {
        Kinds(self.0 | Self::bit(kind))
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds in [`Kind::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Kind> {
        Kind::ALL.into_iter().filter(move |k| self.contains(*k))
    }

    /// Kinds by their labels ([`Kind::label`]), separated by spaces or commas (a tag value
    /// cannot hold a comma). Refuses an unknown label and an empty list: a tenant that wants no
    /// event deletes its stack instead.
    pub fn parse(text: &str) -> Result<Kinds, String> {
        let mut kinds = Kinds::NONE;
        for label in text.split([' ', ',']).filter(|l| !l.is_empty()) {
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.label() == label)
                .ok_or_else(|| {
                    format!(
                        "{label:?} is not an event kind; the kinds are {}",
                        Kinds::ALL
                    )
                })?;
            kinds = kinds.with(kind);
        }
        if kinds.is_empty() {
            return Err(format!("no event kind named; the kinds are {}", Kinds::ALL));
        }
        Ok(kinds)
    }
}

impl FromIterator<Kind> for Kinds {
    fn from_iter<I: IntoIterator<Item = Kind>>(kinds: I) -> Self {
        kinds.into_iter().fold(Kinds::NONE, Kinds::with)
    }
}

/// The labels, space-separated (the tag's form).
impl fmt::Display for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.iter().map(Kind::label).collect();
        f.write_str(&labels.join(" "))
    }
}

impl fmt::Debug for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Kinds({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_holds_every_kind_and_none_holds_none() {
        for kind in Kind::ALL {
            assert!(Kinds::ALL.contains(kind), "{kind}");
            assert!(!Kinds::NONE.contains(kind), "{kind}");
        }
        assert_eq!(Kinds::ALL.iter().collect::<Vec<_>>(), Kind::ALL);
        // Adding a kind already held keeps it (a tag may name one twice).
        assert_eq!(Kinds::ALL.with(Kind::StateChange), Kinds::ALL);
        assert_eq!(
            Kinds::parse("state-change state-change"),
            Ok(Kinds::NONE.with(Kind::StateChange))
        );
        assert_eq!(
            format!("{:?}", Kinds::NONE.with(Kind::StateChange)),
            "Kinds(state-change)"
        );
    }

    #[test]
    fn kinds_read_back_what_they_write() {
        let chosen: Kinds = [Kind::SpotInterruption, Kind::StateChange]
            .into_iter()
            .collect();
        assert_eq!(chosen.to_string(), "spot-interruption state-change");
        assert_eq!(Kinds::parse(&chosen.to_string()), Ok(chosen));
        assert_eq!(
            Kinds::parse("state-change,spot-interruption"),
            Ok(chosen),
            "commas as CloudFormation lists them"
        );
        assert!(!chosen.contains(Kind::ScheduledChange));
        assert_eq!(Kinds::parse(&Kinds::ALL.to_string()), Ok(Kinds::ALL));
    }

    #[test]
    fn unknown_labels_and_empty_lists_are_refused_naming_the_kinds() {
        let unknown = Kinds::parse("spot-interruption health").unwrap_err();
        assert!(
            unknown.contains("\"health\"") && unknown.contains("scheduled-change"),
            "{unknown}"
        );
        assert!(Kinds::parse(" ").is_err());
        assert!(Kinds::parse("").is_err());
    }
}
