//! Untrusted output: whether it taints a call, and what a session remembers
//! of it once an untrusted tool has answered.

use std::collections::BTreeSet;

use serde_json::Value;

use super::prepared::{Prepared, Stage};
use super::stages::Stages;
use crate::policy::{Caller, Taint};
use crate::result::{Code, ToolResult};
use crate::store::Store;
use crate::taint;
use crate::tool::ToolSpec;

impl<St: Store> Stages<St> {
    /// Whether untrusted output taints this call, as the caller's level
    /// judges it: `Some` with the arguments that carry a value read in the
    /// session's untrusted output (`Values`), or empty (`Session`: the
    /// session read some). Only side effects are ever tainted.
    ///
    /// The call's arguments are built as JSON only in a session that read
    /// untrusted output.
    ///
    /// `known`: whether the session read untrusted output, when the call's
    /// start found out already; the store is asked only when it did not.
    pub(super) async fn taint_of(
        &self,
        prepared: &mut Prepared<'_>,
        known: Option<bool>,
    ) -> Stage<Option<Vec<String>>> {
        let (spec, session, caller) = (prepared.spec, prepared.session, prepared.caller);
        if !spec.side_effect() {
            return Ok(None);
        }
        let store_error = |error| self.store_unavailable(spec.name(), &error);
        let level = caller.policy().taint_level();
        if level == Taint::Off {
            return Ok(None);
        }
        // Most sessions never read untrusted output: that first (unless the
        // call's start found out), and the arguments fingerprinted (regexes
        // and a digest per token) only in a session that did.
        let any = match known {
            Some(any) => any,
            None => {
                self.store
                    .tainted(session, &[])
                    .await
                    .map_err(store_error)?
                    .any
            }
        };
        match level {
            Taint::Session => Ok(any.then(Vec::new)),
            _ => {
                if !any {
                    return Ok(None);
                }
                let found = taint::of_arguments(self.json(prepared)?);
                if found.is_empty() {
                    return Ok(None);
                }
                let prints: Vec<String> = found
                    .iter()
                    .flat_map(|(_, prints)| prints.iter().cloned())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let hit = self
                    .store
                    .tainted(session, &prints)
                    .await
                    .map_err(store_error)?;
                if hit.seen.is_empty() {
                    return Ok(None);
                }
                let seen: BTreeSet<&String> = hit.seen.iter().collect();
                let mut fields: Vec<String> = found
                    .into_iter()
                    .filter(|(_, prints)| prints.iter().any(|p| seen.contains(p)))
                    .map(|(path, _)| path)
                    .collect();
                fields.dedup();
                Ok(Some(fields))
            }
        }
    }

    /// After an untrusted tool ran: its output's values taint the session
    /// (`Values`), or the session is marked (`Session`). A store that fails
    /// here fails the call: an untrusted output the session does not
    /// remember would let its values through.
    pub(super) async fn remember_untrusted(
        &self,
        spec: &'static ToolSpec,
        session: &str,
        caller: &Caller,
        given: Option<&Value>,
        result: &ToolResult,
    ) -> Stage<()> {
        if !spec.untrusted_output() || !result.ok || result.code != Code::Ok {
            return Ok(());
        }
        let prints: Vec<String> = match caller.policy().taint_level() {
            Taint::Off => return Ok(()),
            Taint::Session => Vec::new(),
            _ => {
                let mut prints = BTreeSet::new();
                taint::of_output(
                    &Value::Object(serde_json::Map::clone(&result.data)),
                    &mut prints,
                );
                if let Some(own) = given.map(taint::of_given) {
                    prints.retain(|print| !own.contains(print));
                }
                prints.into_iter().collect()
            }
        };
        self.store
            .add_taint(session, &prints)
            .await
            .map_err(|error| self.store_unavailable(spec.name(), &error))
    }
}
