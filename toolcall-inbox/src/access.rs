//! Who may use the inbox: one secret token per person, compared in
//! constant time.

use std::fmt;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The shortest token the inbox accepts: 16 characters. A generated one has 64.
pub const MIN_TOKEN_LEN: usize = 16;

/// The name of a person whose token file line gives none, and of the
/// person a generated token signs in.
pub const DEFAULT_NAME: &str = "operator";

/// The cookie that keeps a browser signed in.
pub(crate) const COOKIE: &str = "toolcall_inbox";

/// One person who may decide: a name (recorded with every decision), a
/// secret token, and whether they are an admin (who may stop a tool, a
/// caller or everything from the inbox).
#[derive(Clone)]
pub struct User {
    name: String,
    token: String,
    admin: bool,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        f.debug_struct("User")
            .field("name", &self.name)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

impl User {
    fn new(name: &str, token: &str) -> Self {
        User {
            name: name.to_owned(),
            token: token.to_owned(),
            admin: false,
        }
    }

    /// The person's name, as decisions record it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token that signs this person in.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether this person is an admin: the operators' page (`/admin`) and
    /// `/api/controls` are theirs only.
    pub fn is_admin(&self) -> bool {
        self.admin
    }
}

/// The role word that makes a token file's person an admin:
/// `NAME TOKEN admin`.
pub const ADMIN_ROLE: &str = "admin";

/// The people who may sign in.
#[derive(Clone, Debug)]
pub struct Access {
    users: Vec<User>,
}

/// A token file or token that cannot be used.
#[derive(Debug)]
pub struct AccessError(String);

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AccessError {}

impl Access {
    /// One person, `name`, with this token (at least [`MIN_TOKEN_LEN`]
    /// characters, no whitespace).
    pub fn token(name: &str, token: &str) -> Result<Self, AccessError> {
        check_token(token)?;
        Ok(Access {
            users: vec![User::new(name, token)],
        })
    }

    /// One person, `name`, with a new random token of 256 bits.
    pub fn generate(name: &str) -> Result<Self, AccessError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| AccessError(format!("no randomness for a token: {e}")))?;
        Access::token(name, &hex(&bytes))
    }

    /// The people of a token file: a line a person, `NAME TOKEN`, or only
    /// `TOKEN` (named `default_name`), or `NAME TOKEN admin` for an admin
    /// ([`ADMIN_ROLE`]: they may also stop tools, callers or everything);
    /// blank lines and lines starting with `#` are skipped. A token shorter
    /// than [`MIN_TOKEN_LEN`], a token or a name given twice, a role other
    /// than `admin`, or a file with no token is an error.
    pub fn from_file(path: &Path, default_name: &str) -> Result<Self, AccessError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| AccessError(format!("cannot read {}: {e}", path.display())))?;
        Access::parse(&text, default_name)
            .map_err(|AccessError(e)| AccessError(format!("{}: {e}", path.display())))
    }

    /// [`from_file`](Self::from_file)'s reading of a file's text.
    pub fn parse(text: &str, default_name: &str) -> Result<Self, AccessError> {
        let mut users: Vec<User> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let (name, token, admin) = match words.as_slice() {
                [token] => (default_name, *token, false),
                [name, token] => (*name, *token, false),
                [name, token, ADMIN_ROLE] => (*name, *token, true),
                [_, _, role] => {
                    return Err(AccessError(format!(
                        "line {}: no role `{role}`: the one role is `{ADMIN_ROLE}` \
                         (`NAME TOKEN {ADMIN_ROLE}`)",
                        number + 1
                    )));
                }
                _ => {
                    return Err(AccessError(format!(
                        "line {}: expected `TOKEN`, `NAME TOKEN` or `NAME TOKEN {ADMIN_ROLE}`",
                        number + 1
                    )));
                }
            };
            check_token(token)
                .map_err(|AccessError(e)| AccessError(format!("line {}: {e}", number + 1)))?;
            if users.iter().any(|u| u.name == name || u.token == token) {
                return Err(AccessError(format!(
                    "line {}: a name or a token given twice",
                    number + 1
                )));
            }
            users.push(User {
                admin,
                ..User::new(name, token)
            });
        }
        if users.is_empty() {
            return Err(AccessError("no token in the file".into()));
        }
        Ok(Access { users })
    }

    /// The people, in the order given.
    pub fn users(&self) -> &[User] {
        &self.users
    }

    /// The same people, every one of them an admin: for a generated token
    /// (the command line's `serve --admin`).
    pub fn admins(mut self) -> Self {
        for user in &mut self.users {
            user.admin = true;
        }
        self
    }

    /// Whether the person named `name` is an admin (a sign-in record keeps
    /// the name; the role is read here, at each request).
    pub(crate) fn is_admin(&self, name: &str) -> bool {
        self.users
            .iter()
            .any(|user| user.name == name && user.admin)
    }

    /// The person whose token this is. Every person's token is compared,
    /// each in constant time ([`same`]), so the time taken says nothing
    /// about the token sent, nor about which person it matched.
    pub(crate) fn by_token(&self, token: &str) -> Option<&User> {
        let mut found = None;
        for user in &self.users {
            if same(user.token.as_bytes(), token.as_bytes()) && found.is_none() {
                found = Some(user);
            }
        }
        found
    }
}

fn check_token(token: &str) -> Result<(), AccessError> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(AccessError(format!(
            "a token needs at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AccessError(
            "a token has no spaces or control characters".into(),
        ));
    }
    Ok(())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `a` and `b` are equal, in time that depends on neither their
/// contents nor their lengths: both are hashed (SHA-256, whose time
/// depends only on the length of each input, and a token's length is no
/// secret the comparison could leak beyond what hashing it shows), then
/// the two digests are compared by folding every byte's difference, with
/// no early exit.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let a: [u8; 32] = Sha256::digest(a).into();
    let b: [u8; 32] = Sha256::digest(b).into();
    let diff = a.iter().zip(&b).fold(0u8, |diff, (x, y)| diff | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_names_its_people() {
        let access = Access::parse(
            "# the team\nana 0123456789abcdef0123\n\nbo  fedcba9876543210fedc\n",
            "x",
        )
        .unwrap();
        let names: Vec<&str> = access.users().iter().map(User::name).collect();
        assert_eq!(names, ["ana", "bo"]);
        assert_eq!(
            access.by_token("fedcba9876543210fedc").unwrap().name(),
            "bo"
        );
        assert!(access.by_token("fedcba9876543210fedd").is_none());
        let single = Access::parse("0123456789abcdef0123\n", "operator").unwrap();
        assert_eq!(single.users()[0].name(), "operator");
        assert!(!single.users()[0].is_admin());
    }

    #[test]
    fn a_token_file_marks_its_admins() {
        let access = Access::parse(
            "ana 0123456789abcdef0123 admin\nbo fedcba9876543210fedc\n",
            "x",
        )
        .unwrap();
        let admins: Vec<bool> = access.users().iter().map(User::is_admin).collect();
        assert_eq!(admins, [true, false]);
        assert!(access.is_admin("ana") && !access.is_admin("bo") && !access.is_admin("cy"));
        let error = Access::parse("ana 0123456789abcdef0123 root\n", "x").unwrap_err();
        assert!(error.to_string().contains("no role `root`"), "{error}");
        let generated = Access::generate("operator").unwrap();
        assert!(!generated.users()[0].is_admin(), "not an admin unless said");
        assert!(generated.admins().users()[0].is_admin());
    }

    #[test]
    fn short_repeated_or_missing_tokens_are_refused() {
        for text in [
            "",
            "# only a comment",
            "short",
            "ana 0123456789abcdef0123\nbo 0123456789abcdef0123",
            "ana 0123456789abcdef0123\nana 0123456789abcdef9999",
            "a b c",
        ] {
            assert!(Access::parse(text, "x").is_err(), "{text:?}");
        }
        assert!(Access::token("x", "0123456789abcdef").is_ok());
        assert!(Access::token("x", "0123456789abcde").is_err());
    }

    #[test]
    fn a_generated_token_is_long_and_random() {
        let access = Access::generate("ana").unwrap();
        let user = &access.users()[0];
        assert_eq!(user.token().len(), 64);
        assert_eq!(access.by_token(user.token()).unwrap().name(), "ana");
        let other = Access::generate("ana").unwrap();
        assert_ne!(other.users()[0].token(), user.token(), "random");
    }

    #[test]
    fn tokens_compare_equal_only_when_equal_whatever_their_lengths() {
        let token = b"0123456789abcdef0123";
        assert!(same(token, token));
        assert!(same(b"", b""));
        assert!(!same(token, b"0123456789abcdef0124"), "the last byte");
        assert!(!same(token, b"1123456789abcdef0123"), "the first byte");
        assert!(!same(token, b"0123456789abcdef012"), "a prefix");
        assert!(!same(token, b"0123456789abcdef01234"), "longer");
        assert!(!same(token, b""));
        assert!(!same(b"", token));
        let access =
            Access::parse("ana 0123456789abcdef0123\nbo fedcba9876543210fedc", "x").unwrap();
        assert!(access.by_token("0123456789abcdef012").is_none());
        assert!(access.by_token("0123456789abcdef01234").is_none());
        assert_eq!(
            access.by_token("fedcba9876543210fedc").unwrap().name(),
            "bo"
        );
    }
}
