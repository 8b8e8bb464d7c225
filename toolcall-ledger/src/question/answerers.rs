//! Who may answer a question besides a person, as the process that asked it
//! recorded.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Who may answer a question besides a person, as the process that asked it
/// recorded with it (`PendingApproval::answerers`). A person (in the
/// inbox, or through the host's `Dispatcher::approve` and `deny`) may always
/// answer an approval question; nobody but a person ever answers a question
/// about an unknown outcome.
///
/// Kept in the store as a list of words (`["host", "client"]`); a question
/// recorded without it (by an earlier version) is a person's only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Answerers {
    host: bool,
    client: bool,
    /// Distinct people who must approve, when more than one (0 and 1: one).
    people: u8,
}

impl Default for Answerers {
    /// A person only ([`Answerers::PERSON`]).
    fn default() -> Self {
        Answerers::PERSON
    }
}

impl Answerers {
    /// A person only.
    pub const PERSON: Answerers = Answerers {
        host: false,
        client: false,
        people: 1,
    };

    /// A person, and the host too when `host` (the asking process was in
    /// `Approvals::Host` mode), and the MCP client
    /// that made the call too when `client`.
    pub fn new(host: bool, client: bool) -> Answerers {
        Answerers {
            host,
            client,
            people: 1,
        }
    }

    /// The same answerers, `people` distinct persons of whom must approve
    /// (the tool's `#[tool(approvals = N)]`, or the operators' controls,
    /// when the question was asked): then neither the host nor a client
    /// answers it. Kept with the question (at most 10).
    pub fn people(self, people: u32) -> Answerers {
        let people = u8::try_from(people.clamp(1, 10)).unwrap_or(10);
        if people > 1 {
            Answerers {
                host: false,
                client: false,
                people,
            }
        } else {
            Answerers { people: 1, ..self }
        }
    }

    /// How many distinct people must approve: 1 unless the question was
    /// asked of more.
    pub fn people_needed(&self) -> u32 {
        u32::from(self.people.max(1))
    }

    /// Whether the host's `confirmed`, or an approval id the host brings
    /// for a question nobody decided, approves.
    pub fn host(&self) -> bool {
        self.host
    }

    /// Whether the MCP client that made the call may answer the question it
    /// was asked, in its own conversation.
    pub fn client(&self) -> bool {
        self.client
    }

    /// The words the store keeps, for a text column: `""` (a person only),
    /// `"host"`, `"client"` or `"host client"`, or `"people:N"` for a
    /// question N people must approve.
    pub fn to_words(&self) -> std::borrow::Cow<'static, str> {
        if self.people > 1 {
            return format!("people:{}", self.people).into();
        }
        match (self.host, self.client) {
            (false, false) => "",
            (true, false) => "host",
            (false, true) => "client",
            (true, true) => "host client",
        }
        .into()
    }

    /// [`to_words`](Answerers::to_words) read back; a word it does not
    /// know grants nothing.
    pub fn from_words(words: &str) -> Answerers {
        let mut answerers = Answerers::PERSON;
        for word in words.split_whitespace() {
            match word {
                "host" => answerers.host = true,
                "client" => answerers.client = true,
                _ => {
                    if let Some(people) = word
                        .strip_prefix("people:")
                        .and_then(|n| n.parse::<u32>().ok())
                    {
                        answerers = answerers.people(people);
                    }
                }
            }
        }
        answerers
    }
}

impl Serialize for Answerers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.to_words();
        let words: Vec<&str> = text.split_whitespace().collect();
        words.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Answerers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let words = Vec::<String>::deserialize(deserializer)?;
        Ok(Answerers::from_words(&words.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answerers_read_back_as_written_and_grant_nothing_unknown() {
        for answerers in [
            Answerers::PERSON,
            Answerers::new(true, false),
            Answerers::new(false, true),
            Answerers::new(true, true),
        ] {
            assert_eq!(Answerers::from_words(&answerers.to_words()), answerers);
            let json = serde_json::to_value(answerers).unwrap();
            assert_eq!(
                serde_json::from_value::<Answerers>(json).unwrap(),
                answerers
            );
        }
        assert_eq!(Answerers::from_words("root everyone"), Answerers::PERSON);
    }
}
