//! The operations a case is made of, and how they are drawn.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    Plain,
    Confirmed,
    /// With the id of the newest question of this call and requester the
    /// model knows.
    WithId,
    /// With the id of the newest question of this call another requester
    /// (another principal, or none) asked: not this call's.
    OthersId,
    DryRun,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    LoseAnswer,
    FailBefore,
    ReconcileDown,
    CrashAfterClaim,
    CrashBeforeComplete,
    /// The store goes away for one call of this method.
    Store(Outage, &'static str),
    /// Another process holds the call's resource (a call of another
    /// caller or conversation on the same disk or service, in its check):
    /// for longer than the call waits, or, `released`, for a moment.
    Busy {
        released: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// The host's `approve`, `deny`, `settle` (a person).
    Host,
    /// The inbox (a person, through `life::decide`).
    Inbox,
    /// The MCP client that made the call; `true`: its server lets clients
    /// decide.
    Client(bool),
}

/// Who answers a question through the inbox or the host's API: ana and bo
/// are also principals who make calls; cy never does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Person {
    Ana,
    Bo,
    Cy,
    /// Whoever made the call: the principal behind the caller, or the
    /// caller (its id, as a person's name).
    Requester,
}

pub(crate) const PEOPLE: [&str; 3] = ["ana", "bo", "cy"];

impl Person {
    pub(crate) fn name(self, q: &Question) -> &'static str {
        match self {
            Person::Ana => PEOPLE[0],
            Person::Bo => PEOPLE[1],
            Person::Cy => PEOPLE[2],
            Person::Requester => q.requester_name(),
        }
    }
}

/// What an operator stops: a tool (of [`TOOLS`]) or a caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stopped {
    Tool(usize),
    Caller(usize),
}

impl Stopped {
    pub(crate) fn target(self) -> Target {
        match self {
            Stopped::Tool(tool) => Target::Tool(TOOLS[tool].to_owned()),
            Stopped::Caller(caller) => Target::Caller(CALLERS[caller].to_owned()),
        }
    }
}

/// The policy part of the operators' controls a load puts in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Rules {
    /// Nothing: the code's policy.
    #[default]
    Lift,
    /// `[approvals] wipe = 2`.
    TwoPeople,
    /// A rate limit of [`PAGES_PER_WINDOW`] pages per caller in a window
    /// far longer than a run, and a rule approving wipes of disk 0 (`arg`
    /// at most 0) without a person.
    Limits,
}

pub(crate) const PAGES_PER_WINDOW: u64 = 2;
pub(crate) const RULE: &str = "small-wipes";

impl Rules {
    pub(crate) fn controls(self) -> Controls {
        let document = match self {
            Rules::Lift => json!({}),
            Rules::TwoPeople => json!({"approvals": {"wipe": 2}}),
            Rules::Limits => json!({
                "rate_limits": [{
                    "name": "pages", "tool": "page", "calls": PAGES_PER_WINDOW, "per": "366d"
                }],
                "approval_rules": [{
                    "name": RULE, "tool": "wipe", "arguments": {"arg": {"max": 0}}
                }],
            }),
        };
        serde_json::from_value(document).unwrap()
    }

    /// How many distinct people the controls ask for a call of `tool`.
    pub(crate) fn people(self, tool: usize) -> u32 {
        if self == Rules::TwoPeople && tool == WIPE {
            2
        } else {
            1
        }
    }
}

/// How far an [`Op::Tick`] moves the test's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// One step: less than an approval's time.
    Step,
    /// An approval's time: whatever was asked before it expires.
    Approval,
    /// A denial's own period: whatever was denied before it lapses.
    Denial,
}

impl Tick {
    pub(crate) fn ms(self) -> u64 {
        match self {
            Tick::Step => reference::STEP_MS,
            Tick::Approval => reference::APPROVAL_MS,
            Tick::Denial => reference::DENIAL_MS,
        }
    }
}

/// What comes before (or while) a replica waits for a decision, through
/// the other replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum First {
    /// Nothing: the wait finds the question as it stands.
    Nothing,
    /// As many people as it needs decide it, in the inbox.
    Decide(Said),
    /// They decide it, and the other replica carries the decision out (its
    /// requester's call with the id).
    CarryOut(Said),
    /// They decide it while the wait runs.
    Meanwhile(Said),
    /// One person approves it: of a question several people must sign,
    /// one signature.
    SignOnce,
    /// They decide it, and nobody carries the decision out within the
    /// approval's time (the clock moves that far): an approval expires, a
    /// denial stands.
    Lapse(Said),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// A fresh call: which, by whom (and the principal of
    /// [`PRINCIPALS`] behind the caller, if any), through which replica,
    /// how, meeting what.
    Call(Calling),
    Read {
        caller: usize,
        conversation: usize,
        replica: usize,
    },
    Answer {
        /// Which known question: the newest below 4, else this modulo how
        /// many there are.
        question: usize,
        said: Said,
        via: Via,
        replica: usize,
        /// Answer as the other caller (someone else's question).
        intruder: bool,
        /// Who, through the inbox or the host's API.
        person: Person,
        /// Another process holds the call's resource while the host's
        /// `approve` or `settle` carries the decision out.
        busy: bool,
    },
    /// An operator stops a tool or a caller through this replica's store;
    /// `lost`: the store's answer to the write is lost (the stop landed).
    Stop {
        what: Stopped,
        replica: usize,
        lost: bool,
    },
    /// An operator enables what is stopped (the `pick`th of what the model
    /// knows stopped; with nothing stopped, a tool that is not).
    Resume {
        pick: usize,
        replica: usize,
    },
    /// An operator loads a policy through this replica's store.
    Load {
        rules: Rules,
        replica: usize,
    },
    Sweep {
        replica: usize,
    },
    /// Lets leases run out.
    Wait,
    /// The identical call of one made before (the `back`th last), by its
    /// requester or, `other`, the next one of: the caller alone, ana, bo.
    Again {
        back: usize,
        other: bool,
        replica: usize,
        how: How,
        fault: Fault,
        client_answers: bool,
    },
    /// Moves the test's clock.
    Tick(Tick),
    /// A replica waits for a decision on a known question (see [`waited`]),
    /// the call made by its requester; `past`: with the wait's time already
    /// past.
    WaitFor {
        question: usize,
        replica: usize,
        first: First,
        past: bool,
    },
}

pub(crate) fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        6 => Just(Fault::None),
        2 => Just(Fault::LoseAnswer),
        1 => Just(Fault::FailBefore),
        1 => Just(Fault::ReconcileDown),
        1 => Just(Fault::CrashAfterClaim),
        1 => Just(Fault::CrashBeforeComplete),
        1 => any::<bool>().prop_map(|released| Fault::Busy { released }),
        1 => prop_oneof![
            Just("complete"),
            Just("doubt"),
            Just("claim"),
            Just("begin_call"),
            Just("ask_approval"),
            Just("take_approval"),
            Just("take_rate"),
        ]
        .prop_flat_map(|method| prop_oneof![
            Just(Fault::Store(Outage::Down, method)),
            Just(Fault::Store(Outage::AnswersLost, method)),
        ]),
    ]
}

pub(crate) fn how() -> impl Strategy<Value = How> {
    prop_oneof![
        6 => Just(How::Plain),
        4 => Just(How::Confirmed),
        4 => Just(How::WithId),
        2 => Just(How::OthersId),
        2 => Just(How::DryRun),
    ]
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    let call = (
        (
            0..2usize,
            prop_oneof![2 => Just(None), 1 => Just(Some(0)), 1 => Just(Some(1))],
        ),
        0..2usize,
        0..2usize,
        0..SIDE_EFFECTS.len(),
        0..2i64,
        how(),
        fault(),
        any::<bool>(),
    )
        .prop_map(
            |(
                (caller, principal),
                conversation,
                replica,
                tool,
                arg,
                how,
                fault,
                client_answers,
            )| {
                Op::Call(Calling {
                    identity: (caller, conversation, tool, arg),
                    principal,
                    replica,
                    how,
                    fault,
                    client_answers,
                })
            },
        );
    let answer = (
        0..8usize,
        prop_oneof![
            2 => Just(Said::Approve),
            1 => Just(Said::Deny),
            1 => Just(Said::Happened),
            1 => Just(Said::NotHappened),
        ],
        prop_oneof![
            2 => Just(Via::Host),
            2 => Just(Via::Inbox),
            1 => Just(Via::Client(true)),
            1 => Just(Via::Client(false)),
        ],
        (0..2usize, prop::bool::weighted(0.25)),
        prop::bool::weighted(0.15),
        prop_oneof![
            7 => Just(Person::Ana),
            6 => Just(Person::Bo),
            3 => Just(Person::Cy),
            4 => Just(Person::Requester),
        ],
    )
        .prop_map(
            |(question, said, via, (replica, busy), intruder, person)| Op::Answer {
                question,
                said,
                via,
                replica,
                intruder,
                person,
                busy,
            },
        );
    let stopped = prop_oneof![
        2 => Just(Stopped::Tool(WIPE)),
        3 => (0..TOOLS.len()).prop_map(Stopped::Tool),
        2 => (0..2usize).prop_map(Stopped::Caller),
    ];
    let stop =
        (stopped, 0..2usize, prop::bool::weighted(0.15)).prop_map(|(what, replica, lost)| {
            Op::Stop {
                what,
                replica,
                lost,
            }
        });
    let load = (
        prop_oneof![
            2 => Just(Rules::TwoPeople),
            1 => Just(Rules::Lift),
            1 => Just(Rules::Limits),
        ],
        0..2usize,
    )
        .prop_map(|(rules, replica)| Op::Load { rules, replica });
    let again = (
        0..3usize,
        prop::bool::weighted(0.3),
        0..2usize,
        how(),
        fault(),
        any::<bool>(),
    )
        .prop_map(
            |(back, other, replica, how, fault, client_answers)| Op::Again {
                back,
                other,
                replica,
                how,
                fault,
                client_answers,
            },
        );
    prop_oneof![
        6 => call,
        4 => again,
        1 => (0..2usize, 0..2usize, 0..2usize).prop_map(|(caller, conversation, replica)| Op::Read { caller, conversation, replica }),
        4 => answer,
        1 => (0..2usize).prop_map(|replica| Op::Sweep { replica }),
        1 => Just(Op::Wait),
        1 => stop,
        1 => (0..4usize, 0..2usize).prop_map(|(pick, replica)| Op::Resume { pick, replica }),
        1 => load,
        3 => prop_oneof![
            2 => Just(Tick::Step),
            2 => Just(Tick::Approval),
            1 => Just(Tick::Denial),
        ]
        .prop_map(Op::Tick),
        3 => wait_for_op(),
    ]
}

pub(crate) fn wait_for_op() -> impl Strategy<Value = Op> {
    let said = prop_oneof![2 => Just(Said::Approve), 1 => Just(Said::Deny)];
    let first = prop_oneof![
        2 => Just(First::Nothing),
        2 => said.clone().prop_map(First::Decide),
        2 => said.clone().prop_map(First::CarryOut),
        1 => said.clone().prop_map(First::Meanwhile),
        1 => Just(First::SignOnce),
        2 => said.prop_map(First::Lapse),
    ];
    (0..8usize, 0..2usize, first, prop::bool::weighted(0.3)).prop_map(
        |(question, replica, first, past)| Op::WaitFor {
            question,
            replica,
            first,
            past,
        },
    )
}

/// A case: the modes of the two replicas, whether callers share
/// conversations, and the operations.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) modes: [Approvals; 2],
    pub(crate) share: bool,
    /// The operators' policy loaded before the first operation.
    pub(crate) rules: Rules,
    pub(crate) ops: Vec<Op>,
}

pub(crate) fn case() -> impl Strategy<Value = Case> {
    let mode = prop_oneof![Just(Approvals::Host), Just(Approvals::Inbox)];
    (
        [mode.clone(), mode],
        prop::bool::weighted(0.25),
        prop_oneof![
            2 => Just(Rules::Lift),
            2 => Just(Rules::TwoPeople),
            1 => Just(Rules::Limits),
        ],
        prop::collection::vec(op(), 1..28),
    )
        .prop_map(|(modes, share, rules, ops)| Case {
            modes,
            share,
            rules,
            ops,
        })
}
