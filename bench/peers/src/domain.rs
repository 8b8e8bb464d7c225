//! The domain both peers serve, the same as toolcall's benchmark: a copy of
//! the orders example's shop (`examples/orders`: orders behind one mutex, a
//! refund backend idempotent per key) with its 10,000 orders
//! `ORD-0000`..`ORD-9999` of 10^12 cents in BRL, the strict argument structs
//! (`deny_unknown_fields`, integer cents, the two enums), the schema's
//! constraints and the refund check, and the four scenarios of `bench.py`
//! with the argument texts byte for byte as `toolcall-bench` builds them.
//!
//! What the peers' tools do per call, beyond their framework: read the
//! order (`get_order`); check the arguments' constraints, the refund
//! against the order, compute the idempotency key (SHA-256 over
//! `session|tool|` and the arguments serialized, hex) and refund under it
//! (`refund_order`). They keep no step budget, no duplicate counter, no
//! audit record and no record of completed calls: replay is the backend's
//! own idempotency.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[path = "../../src/scenario.rs"]
mod scenario;

pub use scenario::{ORDERS, Scenario, chosen, order_id, time_scenarios};

/// The session of every scenario, as in `bench.py`.
pub const SESSION: &str = "bench";
/// `bench.py`'s refund cap, 10^12 cents.
pub const MAX_REFUND_CENTS: i64 = 1_000_000_000_000;

/// A currency an order can be in (the ISO codes, as in the orders example).
#[allow(clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Currency {
    /// Brazilian real.
    BRL,
    /// United States dollar.
    USD,
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Currency::BRL => "BRL",
            Currency::USD => "USD",
        })
    }
}

/// Why a refund is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// The goods arrived damaged.
    Damaged,
    /// The goods never arrived.
    NotDelivered,
    /// The customer asked for it.
    CustomerRequest,
}

/// `get_order`'s arguments.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetOrderArgs {
    /// Order id, for example ORD-1001.
    #[schemars(regex(pattern = r"^ORD-[0-9]{4}$"))]
    pub order_id: String,
}

/// `refund_order`'s arguments.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundOrderArgs {
    /// Order id, for example ORD-1001.
    #[schemars(regex(pattern = r"^ORD-[0-9]{4}$"))]
    pub order_id: String,
    /// Refund amount in minor units (cents). 25.90 is 2590.
    #[schemars(range(min = 1))]
    pub amount_cents: i64,
    /// Must match the order currency.
    pub currency: Currency,
    /// Why the refund is made.
    pub reason: RefundReason,
}

/// A tool's refusal: a code and a message for the model.
#[derive(Debug)]
pub struct Rejection {
    /// `ORDER_NOT_FOUND`, `INVALID_ARGUMENTS`, ...
    pub code: &'static str,
    /// What the model is told.
    pub message: String,
}

impl Rejection {
    fn new(code: &'static str, message: String) -> Self {
        Rejection { code, message }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Rejection {}

/// `^ORD-[0-9]{4}$`, by hand (the schema's pattern, which neither framework
/// checks at call time).
pub fn is_order_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == 8 && bytes.starts_with(b"ORD-") && bytes[4..].iter().all(u8::is_ascii_digit)
}

/// One order in the shop.
#[derive(Clone, Debug)]
pub struct Order {
    /// Its id.
    pub order_id: String,
    /// Who bought it (never read here, but cloned with the order, as in
    /// the orders example).
    #[allow(dead_code)]
    pub customer_id: String,
    /// What was paid, in cents.
    pub total_cents: i64,
    /// In which currency.
    pub currency: Currency,
    /// Refunded so far, in cents.
    pub refunded_cents: i64,
}

impl Order {
    fn refundable_cents(&self) -> i64 {
        self.total_cents - self.refunded_cents
    }
}

/// The orders example's `Shop`: orders and an idempotent refund backend
/// behind one mutex.
#[derive(Debug, Default)]
pub struct Shop {
    state: Mutex<ShopState>,
}

#[derive(Debug, Default)]
struct ShopState {
    orders: BTreeMap<String, Order>,
    applied_refunds: u64,
    processed: HashMap<String, i64>,
}

impl Shop {
    /// `ORD-0000`..`ORD-9999`, each of 10^12 cents in BRL.
    pub fn bench() -> Self {
        let orders = (0..ORDERS)
            .map(|i| {
                let order_id = order_id(i);
                let order = Order {
                    order_id: order_id.clone(),
                    customer_id: "CUS-1".to_owned(),
                    total_cents: 1_000_000_000_000,
                    currency: Currency::BRL,
                    refunded_cents: 0,
                };
                (order_id, order)
            })
            .collect();
        Shop {
            state: Mutex::new(ShopState {
                orders,
                ..ShopState::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ShopState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the order.
    pub fn order(&self, order_id: &str) -> Option<Order> {
        self.state().orders.get(order_id).cloned()
    }

    /// How many refunds were really applied.
    pub fn applied_refunds(&self) -> u64 {
        self.state().applied_refunds
    }

    /// Refunds once per idempotency key; a known key gets its first answer.
    pub fn refund(&self, order_id: &str, amount_cents: i64, key: &str) -> Result<i64, Rejection> {
        let mut state = self.state();
        if let Some(&remaining) = state.processed.get(key) {
            return Ok(remaining);
        }
        let Some(order) = state.orders.get_mut(order_id) else {
            return Err(order_not_found(order_id));
        };
        if amount_cents > order.refundable_cents() {
            return Err(exceeds_refundable(order_id, order.refundable_cents()));
        }
        order.refunded_cents += amount_cents;
        let remaining = order.refundable_cents();
        state.applied_refunds += 1;
        state.processed.insert(key.to_owned(), remaining);
        Ok(remaining)
    }
}

/// What `get_order` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrderView {
    /// The order's id.
    pub order_id: String,
    /// What was paid, in cents.
    pub total_cents: i64,
    /// Refunded so far, in cents.
    pub refunded_cents: i64,
    /// The order's currency.
    pub currency: Currency,
}

/// What `refund_order` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Refund {
    /// The order refunded.
    pub order_id: String,
    /// This refund, in cents.
    pub refunded_cents: i64,
    /// What can still be refunded, in cents.
    pub remaining_refundable_cents: i64,
}

/// The body of `get_order`, whichever framework calls it.
pub fn get_order(shop: &Shop, args: GetOrderArgs) -> Result<OrderView, Rejection> {
    if !is_order_id(&args.order_id) {
        return Err(invalid("order_id: must match ^ORD-[0-9]{4}$"));
    }
    let Some(order) = shop.order(&args.order_id) else {
        return Err(Rejection::new(
            "ORDER_NOT_FOUND",
            format!(
                "Order {} does not exist. Ask the user to confirm the id.",
                args.order_id
            ),
        ));
    };
    Ok(OrderView {
        order_id: order.order_id,
        total_cents: order.total_cents,
        refunded_cents: order.refunded_cents,
        currency: order.currency,
    })
}

/// `get_order` over the orders example's shop in a database: the same
/// checks and answer as [`get_order`], the order read with
/// `orders::Shop::load_order`, the read `orders`' own `get_order` makes.
pub async fn get_stored_order(
    shop: &orders::Shop,
    args: GetOrderArgs,
) -> Result<OrderView, Rejection> {
    if !is_order_id(&args.order_id) {
        return Err(invalid("order_id: must match ^ORD-[0-9]{4}$"));
    }
    let order = shop
        .load_order(&args.order_id)
        .await
        .map_err(|error| Rejection::new("BACKEND_UNAVAILABLE", error.to_string()))?;
    let Some(order) = order else {
        return Err(order_not_found(&args.order_id));
    };
    let currency = match order.currency {
        orders::Currency::BRL => Currency::BRL,
        orders::Currency::USD => Currency::USD,
    };
    Ok(OrderView {
        order_id: order.order_id,
        total_cents: order.total_cents,
        refunded_cents: order.refunded_cents,
        currency,
    })
}

/// The body of `refund_order`, whichever framework calls it: constraints,
/// the refund check and the policy cap, the idempotency key, the refund.
pub fn refund_order(shop: &Shop, args: RefundOrderArgs) -> Result<Refund, Rejection> {
    if !is_order_id(&args.order_id) {
        return Err(invalid("order_id: must match ^ORD-[0-9]{4}$"));
    }
    if args.amount_cents < 1 {
        return Err(invalid("amount_cents: must be at least 1"));
    }
    check_refund(shop, &args)?;
    if args.amount_cents > MAX_REFUND_CENTS {
        return Err(Rejection::new(
            "POLICY_LIMIT",
            format!("Refunds above {MAX_REFUND_CENTS} cents need a human agent."),
        ));
    }
    let key = idempotency_key("refund_order", &args);
    let remaining = shop.refund(&args.order_id, args.amount_cents, &key)?;
    Ok(Refund {
        order_id: args.order_id,
        refunded_cents: args.amount_cents,
        remaining_refundable_cents: remaining,
    })
}

fn check_refund(shop: &Shop, args: &RefundOrderArgs) -> Result<(), Rejection> {
    let Some(order) = shop.order(&args.order_id) else {
        return Err(order_not_found(&args.order_id));
    };
    if args.currency != order.currency {
        return Err(Rejection::new(
            "CURRENCY_MISMATCH",
            format!(
                "Order {} is in {}, not {}. Use the order currency.",
                order.order_id, order.currency, args.currency
            ),
        ));
    }
    if args.amount_cents > order.refundable_cents() {
        return Err(exceeds_refundable(
            &order.order_id,
            order.refundable_cents(),
        ));
    }
    Ok(())
}

/// SHA-256 over `session|tool|` and `args` serialized (streamed into the
/// hasher, as toolcall-bench's floor does), in hex (a table, not `write!`).
pub fn idempotency_key<A: Serialize>(tool: &str, args: &A) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hasher = Sha256::new();
    hasher.update(SESSION.as_bytes());
    hasher.update(b"|");
    hasher.update(tool.as_bytes());
    hasher.update(b"|");
    serde_json::to_writer(&mut hasher, args).expect("strings, integers and enums");
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(DIGITS[usize::from(byte >> 4)] as char);
        hex.push(DIGITS[usize::from(byte & 15)] as char);
    }
    hex
}

fn invalid(message: &str) -> Rejection {
    Rejection::new("INVALID_ARGUMENTS", message.to_owned())
}

fn order_not_found(order_id: &str) -> Rejection {
    Rejection::new(
        "ORDER_NOT_FOUND",
        format!("Order {order_id} does not exist. Call get_order with a valid id."),
    )
}

fn exceeds_refundable(order_id: &str, refundable_cents: i64) -> Rejection {
    Rejection::new(
        "AMOUNT_EXCEEDS_REFUNDABLE",
        format!("Only {refundable_cents} cents can still be refunded on {order_id}."),
    )
}

impl Scenario {
    /// Whether call `i` must succeed.
    pub fn succeeds(self) -> bool {
        self != Scenario::RefundInvalidArgs
    }

    /// The raw arguments of calls `0..n`.
    pub fn calls(self, n: usize) -> Vec<String> {
        (0..n).map(|i| self.arguments(i)).collect()
    }
}
