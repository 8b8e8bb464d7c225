//! The controls checked against a registry and the code's callers.

use std::collections::BTreeSet;

use serde_json::Value;
use toolcall_ledger::controls::{Bound, Controls, ControlsError, Target};

use crate::policy::Caller;
use crate::registry::Registry;

/// The closest of `known` to `name`, as ` (did you mean `x`?)`, or nothing.
fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str> + Clone) -> String {
    crate::suggest::closest(name, known)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
}

/// A target of a stop that this application does not have: what is
/// wrong, with the closest real name and the names there are.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownTarget {
    /// The sentence: ``no tool `refnd_order` (did you mean `refund_order`?);
    /// the tools are get_order, refund_order``.
    pub problem: String,
    /// The closest real name, when one is close enough to be a typo.
    pub closest: Option<String>,
}

/// Whether `target` names a tool of `registry` or a caller of `callers`
/// (`None`: it does, or it is everything); a stop of a name the
/// application does not have would stop nothing, so every way to stop or
/// enable (the command line, the inbox's form and its JSON) refuses it with
/// this.
pub fn unknown_target(
    target: &Target,
    registry: &Registry,
    callers: &[&Caller],
) -> Option<UnknownTarget> {
    let (what, name, known): (&str, &str, Vec<&str>) = match target {
        Target::Tool(name) if registry.get(name).is_none() => (
            "tool",
            name,
            registry.iter().map(|spec| spec.name()).collect(),
        ),
        Target::Caller(id) if !callers.iter().any(|caller| caller.id() == id) => (
            "caller",
            id,
            callers.iter().map(|caller| caller.id()).collect(),
        ),
        _ => return None,
    };
    let closest = crate::suggest::closest(name, known.iter().copied()).map(str::to_owned);
    let near = closest
        .as_ref()
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default();
    Some(UnknownTarget {
        problem: format!(
            "no {what} `{name}`{near}; the {what}s are {}",
            known.join(", ")
        ),
        closest,
    })
}

/// Every problem of these controls against `registry` and the code's
/// callers (`callers`: their policies, the ceiling), each with where it
/// is and its fix; empty when they check. A tool or caller that does not
/// exist, a limit the code does not set or that is raised, a taint
/// level that is looser, an allowlist that adds a tool, a rate limit of
/// no calls, a rule for a tool that needs no approval, or one bounding
/// an argument the tool does not have: each is refused, never ignored.
pub fn check(controls: &Controls, registry: &Registry, callers: &[&Caller]) -> Vec<ControlsError> {
    let mut check = Checker {
        registry,
        callers,
        tools: registry.iter().map(|spec| spec.name()).collect(),
        caller_ids: callers.iter().map(|caller| caller.id()).collect(),
        errors: Vec::new(),
    };
    check.callers(controls);
    check.rate_limits(controls);
    check.approvals(controls);
    check.rules(controls);
    check.errors
}

/// What [`check`] checks against, and the problems it found so far.
struct Checker<'a> {
    registry: &'a Registry,
    callers: &'a [&'a Caller],
    tools: Vec<&'a str>,
    caller_ids: Vec<&'a str>,
    errors: Vec<ControlsError>,
}

impl Checker<'_> {
    fn error(&mut self, at: String, problem: String) {
        self.errors.push(ControlsError { at, problem });
    }

    /// `name`, the name of the item at `at`, is not one `seen` already: a
    /// rate limit or a rule is named by it, and two would be one.
    fn named_once<'c>(
        &mut self,
        seen: &mut BTreeSet<&'c str>,
        name: &'c str,
        at: &str,
        what: &str,
    ) {
        if !seen.insert(name) {
            self.error(format!("{at}.name"), format!("`{name}` names two {what}"));
        }
    }

    fn tool_known(&self, name: &str) -> bool {
        self.tools.contains(&name)
    }

    /// That no tool is named `name`, with the closest one there is.
    fn no_tool(&self, name: &str) -> String {
        format!(
            "no tool `{name}`{}",
            closest(name, self.tools.iter().copied())
        )
    }

    /// A rate limit's or a rule's `caller`, where it names one, is a real
    /// caller.
    fn caller_known(&mut self, at: &str, caller: Option<&str>) {
        if let Some(caller) = caller
            && !self.caller_ids.contains(&caller)
        {
            self.error(
                format!("{at}.caller"),
                format!(
                    "no caller `{caller}`{}",
                    closest(caller, self.caller_ids.iter().copied())
                ),
            );
        }
    }

    /// What the controls say of each caller only narrows its code's policy.
    fn callers(&mut self, controls: &Controls) {
        for (id, rules) in &controls.callers {
            let Some(caller) = self.callers.iter().find(|caller| caller.id() == id) else {
                self.error(
                    format!("callers.{id}"),
                    format!(
                        "no caller `{id}`{}; the callers are {}",
                        closest(id, self.caller_ids.iter().copied()),
                        self.caller_ids.join(", ")
                    ),
                );
                continue;
            };
            let policy = caller.policy();
            for name in rules.allow.iter().flatten() {
                if !self.tool_known(name) {
                    self.error(format!("callers.{id}.allow"), self.no_tool(name));
                } else if !policy.allows(name) {
                    self.error(
                        format!("callers.{id}.allow"),
                        format!(
                            "`{name}` is not in the code's allowlist of `{id}`: the controls can \
                         only take tools away; remove it, or allow it in the code"
                        ),
                    );
                }
            }
            for (limit, value) in &rules.limits {
                match policy.limit_of(limit) {
                    None => self.error(
                        format!("callers.{id}.limits.{limit}"),
                        format!(
                            "the code sets no limit `{limit}` for `{id}`{}",
                            closest(
                                limit,
                                policy
                                    .limits()
                                    .map(|(name, _)| name)
                                    .collect::<Vec<_>>()
                                    .into_iter()
                            )
                        ),
                    ),
                    Some(ceiling) if *value > ceiling => self.error(
                        format!("callers.{id}.limits.{limit}"),
                        format!(
                            "{value} is above the code's {ceiling}: the controls can only lower \
                         a limit"
                        ),
                    ),
                    Some(_) => {}
                }
            }
            if let Some(level) = rules.taint
                && level.strictness() < policy.taint_level().strictness()
            {
                self.error(
                    format!("callers.{id}.taint"),
                    format!(
                        "`{level}` is looser than the code's `{}`: the controls can only make it \
                     stricter (off < values < session)",
                        policy.taint_level()
                    ),
                );
            }
        }
    }

    /// Rate limits have names of their own, count calls, and name real
    /// tools and callers.
    fn rate_limits(&mut self, controls: &Controls) {
        let mut names = BTreeSet::new();
        for (at, limit) in controls.rate_limits.iter().enumerate() {
            let at = format!("rate_limits[{at}]");
            self.named_once(&mut names, &limit.name, &at, "rate limits");
            if limit.calls == 0 {
                self.error(
                    format!("{at}.calls"),
                    "0 calls stops the tool: write 1 or more, or stop it with `admin disable`"
                        .to_owned(),
                );
            }
            if let Some(tool) = &limit.tool
                && !self.tool_known(tool)
            {
                self.error(format!("{at}.tool"), self.no_tool(tool));
            }
            self.caller_known(&at, limit.caller.as_deref());
        }
    }

    /// Approvals by several people ask between 2 and 10 of a side effect.
    fn approvals(&mut self, controls: &Controls) {
        for (tool, people) in &controls.approvals {
            match self.registry.get(tool) {
                None => self.error(format!("approvals.{tool}"), self.no_tool(tool)),
                Some(spec) if !spec.side_effect() => self.error(
                    format!("approvals.{tool}"),
                    format!("`{tool}` has no side effect: nobody is asked to approve it"),
                ),
                Some(_) if *people < 2 => self.error(
                    format!("approvals.{tool}"),
                    format!("{people}: write 2 or more (one person is the tool's own rule)"),
                ),
                Some(_) if *people > 10 => self.error(
                    format!("approvals.{tool}"),
                    format!("{people}: at most 10 people"),
                ),
                Some(_) => {}
            }
        }
    }

    /// A rule approves in a person's place only within bounds that fit.
    fn rules(&mut self, controls: &Controls) {
        let mut rule_names = BTreeSet::new();
        for (at, rule) in controls.approval_rules.iter().enumerate() {
            let at = format!("approval_rules[{at}]");
            self.named_once(&mut rule_names, &rule.name, &at, "rules");
            match self.registry.get(&rule.tool) {
                None => self.error(format!("{at}.tool"), self.no_tool(&rule.tool)),
                Some(spec) => {
                    if controls.people_needed(&rule.tool) > 1 {
                        self.error(
                            format!("{at}.tool"),
                            format!(
                                "`{}` needs {} people (approvals.{}): a rule cannot stand in \
                             for them",
                                rule.tool,
                                controls.people_needed(&rule.tool),
                                rule.tool
                            ),
                        );
                    }
                    if !spec.side_effect() {
                        self.error(
                            format!("{at}.tool"),
                            format!("`{}` has no side effect: it needs no approval", rule.tool),
                        );
                    }
                    let fields: Vec<&str> = spec.fields().iter().map(|f| f.name).collect();
                    for name in rule.arguments.keys() {
                        if !fields.contains(&name.as_str()) {
                            self.error(
                                format!("{at}.arguments.{name}"),
                                format!(
                                    "`{}` has no argument `{name}`{}",
                                    rule.tool,
                                    closest(name, fields.iter().copied())
                                ),
                            );
                        }
                    }
                }
            }
            self.caller_known(&at, rule.caller.as_deref());
            for (name, bound) in &rule.arguments {
                if bound.min.is_none() && bound.max.is_none() && bound.one_of.is_none() {
                    self.error(
                        format!("{at}.arguments.{name}"),
                        "an empty bound admits any value: give min, max or one_of".to_owned(),
                    );
                }
                if let Some(spec) = self.registry.get(&rule.tool)
                    && spec.fields().iter().any(|field| field.name == name)
                {
                    for (part, problem) in bound_problems(bound, name, spec) {
                        let at = match part.as_str() {
                            "" => format!("{at}.arguments.{name}"),
                            part => format!("{at}.arguments.{name}.{part}"),
                        };
                        self.error(at, problem);
                    }
                }
            }
            if rule.arguments.is_empty() {
                self.error(
                    format!("{at}.arguments"),
                    "a rule with no bound approves every call of the tool: bound an argument, \
                 or lower the tool's risk in the code"
                        .to_owned(),
                );
            }
        }
    }
}

/// Every problem of `bound` on the argument `field` of `spec`: its numbers
/// ([`Bound::number_problems`]), a number bound on an argument that is not
/// a number, a fractional bound on an integer, an admitted value the tool
/// refuses.
fn bound_problems(bound: &Bound, field: &str, spec: &crate::ToolSpec) -> Vec<(String, String)> {
    let mut problems: Vec<(String, String)> = bound
        .number_problems()
        .into_iter()
        .map(|(side, why)| (side.to_owned(), why))
        .collect();
    if bound.min.is_some() || bound.max.is_some() {
        let schema = spec.parameters_schema();
        match numeric_kind(&schema, field) {
            Numeric::No(ty) => problems.push((
                String::new(),
                format!("`{field}` is {ty}, and min and max compare numbers: bound it with one_of"),
            )),
            Numeric::Integer => {
                for (side, number) in [("min", bound.min), ("max", bound.max)] {
                    if let Some(number) = number
                        && number.fract() != 0.0
                    {
                        problems.push((
                            side.to_owned(),
                            format!(
                                "{number} is not an integer, and `{field}` is one: write {}",
                                if side == "min" {
                                    number.ceil()
                                } else {
                                    number.floor()
                                }
                            ),
                        ));
                    }
                }
            }
            Numeric::Number => {}
        }
    }
    for (at, admitted) in bound.one_of.iter().flatten().enumerate() {
        let probe = Value::Object([(field.to_owned(), admitted.clone())].into_iter().collect());
        if let Err(errors) = spec.validate_arguments(&probe)
            && let Some(problem) = errors.problems().iter().find(|problem| {
                let path = problem.path();
                path == field
                    || path
                        .strip_prefix(field)
                        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
            })
        {
            problems.push((
                format!("one_of[{at}]"),
                format!(
                    "the tool refuses {admitted} for `{field}` ({}), so the rule could \
                     never admit it",
                    problem.problem()
                ),
            ));
        }
    }
    problems
}

/// Whether an argument's schema admits numbers, and which.
enum Numeric {
    Integer,
    Number,
    /// Not a number: what it is, in words.
    No(&'static str),
}

fn numeric_kind(schema: &Value, field: &str) -> Numeric {
    let Some(property) = schema.pointer(&format!(
        "/properties/{}",
        crate::schema::escape_pointer(field)
    )) else {
        return Numeric::Number;
    };
    let mut types = BTreeSet::new();
    collect_types(schema, property, &mut types, 0);
    if types.is_empty() || types.contains("number") {
        Numeric::Number
    } else if types.contains("integer") {
        Numeric::Integer
    } else if types.contains("string") {
        Numeric::No("a string")
    } else if types.contains("boolean") {
        Numeric::No("a boolean")
    } else if types.contains("array") {
        Numeric::No("a list")
    } else {
        Numeric::No("an object")
    }
}

/// The JSON types `schema` admits, other than null, through `$ref`s and
/// `anyOf`/`oneOf`; none when it says nothing of them (any value).
fn collect_types(root: &Value, schema: &Value, types: &mut BTreeSet<String>, depth: u8) {
    if depth > 8 {
        types.clear();
        return;
    }
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(target) = object.get("$ref").and_then(Value::as_str)
        && let Some(resolved) = target.strip_prefix('#').and_then(|at| root.pointer(at))
    {
        collect_types(root, resolved, types, depth + 1);
    }
    match object.get("type") {
        Some(Value::String(ty)) if ty != "null" => {
            types.insert(ty.clone());
        }
        Some(Value::Array(list)) => {
            types.extend(
                list.iter()
                    .filter_map(Value::as_str)
                    .filter(|t| *t != "null")
                    .map(str::to_owned),
            );
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = object.get("enum") {
        for value in values {
            let ty = match value {
                Value::String(_) => "string",
                Value::Number(_) => "number",
                Value::Bool(_) => "boolean",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
                Value::Null => continue,
            };
            types.insert(ty.to_owned());
        }
    }
    for keyword in ["anyOf", "oneOf", "allOf"] {
        for branch in object
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            collect_types(root, branch, types, depth + 1);
        }
    }
}
