//! The contract lock file: what it records, that it reads back what it
//! writes, and which changes `check` calls breaking.
//!
//! Three modules declare tools under the same names, as one codebase would
//! at three moments: `v1` is the locked contract, `breaking` changes it in
//! every way that breaks a caller, `compatible` in ways that do not.

use serde_json::json;

use toolcall::{Registry, Rejection};

use toolcall_contract::lock::{self, Change, ChangeKind, LockError, Lockfile, Severity};

type Out = Result<serde_json::Value, Rejection>;

fn done() -> Out {
    Ok(json!({}))
}

// ------------------------------------------- unions, tuples, widening, renames

/// Two versions of one tool `t`, as a codebase would have them before and
/// after a change.
macro_rules! case {
    ($name:ident, { $($before:tt)* }, { $($after:tt)* }) => {
        mod $name {
            pub mod before {
                #![allow(dead_code)]
                use crate::{Out, done};
                use toolcall::tool;
                $($before)*
            }
            pub mod after {
                #![allow(dead_code)]
                use crate::{Out, done};
                use toolcall::tool;
                $($after)*
            }
        }
    };
    // The common case: one tool `t` of one argument, the same in both
    // versions, whose type is what changes.
    (
        $name:ident,
        tool { about: $about:literal, arg: $arg:ident, doc: $doc:literal, ty: $($ty:tt)+ },
        { $($before:tt)* },
        { $($after:tt)* }
    ) => {
        case!(
            $name,
            { $($before)* case!(@tool $about, $arg, $doc, $($ty)+); },
            { $($after)* case!(@tool $about, $arg, $doc, $($ty)+); }
        );
    };
    (@tool $about:literal, $arg:ident, $doc:literal, $($ty:tt)+) => {
        #[doc = $about]
        #[tool]
        pub fn t(
            #[doc = $doc]
            $arg: $($ty)+,
        ) -> Out {
            let _ = $arg;
            done()
        }
    };
}

/// The locks of the two versions of a case.
macro_rules! locks {
    ($name:ident) => {
        (
            Lockfile::from_registry(&toolcall::tools![$name::before::t].unwrap()),
            Lockfile::from_registry(&toolcall::tools![$name::after::t].unwrap()),
        )
    };
}

/// What `check` prints for a case, one line a change.
macro_rules! check {
    ($name:ident) => {{
        let (before, after) = locks!($name);
        lines(&lock::check(&before, &after))
    }};
}

mod v1 {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
        /// United States dollar.
        Usd,
    }

    /// Why.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Reason {
        Damaged,
        NotDelivered,
    }

    /// A label.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
        /// Its colour.
        pub color: Option<String>,
    }

    /// Looks an order up.
    #[tool]
    pub fn get_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Refunds an order.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in cents.
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
        /// Why.
        reason: Reason,
        /// A note.
        note: Option<String>,
    ) -> Out {
        let _ = (order_id, amount_cents, currency, reason, note);
        done()
    }

    /// Cancels an order.
    #[tool(side_effect)]
    pub fn cancel_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 10)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }
}

mod breaking {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency, USD gone.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
    }

    /// A label whose colour went away.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
    }

    // Unchanged: the same tool, as a codebase that kept it would have it.
    pub use super::v1::get_order;

    /// Refunds an order: no longer high-risk, `order_id` renamed, the amount
    /// a string, USD gone, `reason` gone, a new required customer, and the
    /// note required.
    #[tool(side_effect)]
    pub fn refund_order(
        /// The order's reference.
        order_ref: String,
        /// The amount, as text.
        amount_cents: String,
        /// The currency.
        currency: Currency,
        /// The customer's id.
        customer_id: u64,
        /// A note.
        note: String,
    ) -> Out {
        let _ = (order_ref, amount_cents, currency, customer_id, note);
        done()
    }

    /// Cancels an order, version 2 (the old name is gone).
    #[tool(side_effect, name = "cancel_order", version = 2)]
    pub fn cancel_order(
        /// Order id.
        order_id: String,
        /// Why it is cancelled.
        reason: String,
    ) -> Out {
        let _ = (order_id, reason);
        done()
    }

    /// Ships an order: now a read, and a shorter note.
    #[tool]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 5)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }
}

mod compatible {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency, one more.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
        /// United States dollar.
        Usd,
        /// Euro.
        Eur,
    }

    pub use super::v1::Reason;

    /// A label with a priority.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
        /// Its colour.
        pub color: Option<String>,
        /// Its rank.
        pub priority: Option<u8>,
    }

    /// Looks an order up, and now records that it did.
    #[tool(side_effect)]
    pub fn get_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Refunds part or all of an order.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in minor units (cents).
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
        /// Why.
        reason: Reason,
        /// A note.
        note: Option<String>,
        /// For the accounting team.
        memo: Option<String>,
    ) -> Out {
        let _ = (order_id, amount_cents, currency, reason, note, memo);
        done()
    }

    pub use super::v1::cancel_order;

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 20)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }

    /// Lists a customer's orders.
    #[tool]
    pub fn list_orders(
        /// The customer's id.
        customer_id: String,
    ) -> Out {
        let _ = customer_id;
        done()
    }
}

fn locked() -> Lockfile {
    let registry: Registry = toolcall::tools![
        v1::ship_order,
        v1::refund_order,
        v1::get_order,
        v1::cancel_order,
        v1::tag_order
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

fn after_breaking() -> Lockfile {
    let registry = toolcall::tools![
        breaking::get_order,
        breaking::refund_order,
        breaking::cancel_order,
        breaking::ship_order,
        breaking::tag_order
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

fn after_compatible() -> Lockfile {
    let registry = toolcall::tools![
        compatible::get_order,
        compatible::refund_order,
        compatible::cancel_order,
        compatible::ship_order,
        compatible::tag_order,
        compatible::list_orders
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

/// Each change as `breaking: ...`, `review: ...` or `compatible: ...`, as
/// `check` prints them.
fn lines(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| format!("{}: {c}", c.severity()))
        .collect()
}

#[test]
fn the_lock_file_reads_back_what_it_writes() {
    let lock = locked();
    let text = lock.to_json_pretty();
    let parsed = Lockfile::parse(&text).unwrap();
    assert_eq!(parsed, lock);
    assert_eq!(
        parsed.to_json_pretty(),
        text,
        "writing is byte-for-byte stable"
    );
    assert!(text.ends_with("}\n"));
    assert!(
        lock::check(&parsed, &lock).is_empty(),
        "no change, no report"
    );
    insta::assert_snapshot!("tools_lock_json", text);
}

mod changes;
mod reading;
mod shapes;
