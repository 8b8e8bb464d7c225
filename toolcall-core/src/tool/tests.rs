use super::*;
use crate::error::Rejection;

struct Cal;

fn check_cancel(args: &NoArgs, ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    let _ = (args, ctx);
    Ok(())
}

async fn find_cancel(ctx: &Ctx<Cal>, key: &str) -> Result<Option<u32>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct NoArgs {}

impl ToolArgs for NoArgs {
    fn fields() -> &'static [FieldMeta] {
        &[]
    }

    fn from_members(_: &Members<'_>, _: &mut FieldErrors) -> Option<Self> {
        Some(NoArgs {})
    }
}

/// A tool without a context of its own whose check and reconcile take
/// one, as `#[tool]` writes it.
struct Cancel;

fn check_state() -> StateType {
    check_sig::<NoArgs, _, _, _, _>(&check_cancel).state()
}

fn reconcile_state() -> StateType {
    reconcile_sig::<_, _, _, _, Result<u32, Rejection>>(&find_cancel).state()
}

impl Tool for Cancel {
    type Args = NoArgs;

    fn spec() -> &'static ToolSpec {
        static SPEC: ToolSpec = ToolSpec::__new::<Cancel>(
            SpecParts {
                name: "cancel",
                description: "Cancels.",
                side_effect: true,
                high_risk: false,
                untrusted_output: false,
                idempotent_backend: false,
                timeout_ms: None,
                max_output_bytes: None,
                state: None,
                reconcile: true,
                check_state: Some(check_state),
                reconcile_state: Some(reconcile_state),
            },
            &[],
        );
        &SPEC
    }

    fn check(args: &NoArgs, cx: &CallContext<'_>) -> Result<(), ToolError> {
        let check = check_sig::<NoArgs, _, _, _, _>(&check_cancel);
        let ctx = check.context(cx)?;
        check.run(&check_cancel, args, &ctx)
    }

    fn call<'a>(
        _: NoArgs,
        _: &'a CallContext<'_>,
    ) -> BoxFuture<'a, Result<crate::Data, ToolError>> {
        Box::pin(async { Ok(crate::Data::new()) })
    }
}

#[test]
fn the_spec_records_the_state_a_check_and_a_reconcile_function_need() {
    let spec = Cancel::spec();
    assert!(spec.state_type().is_none());
    let check = spec.check_state_type().expect("the check takes a context");
    assert_eq!(check.id, TypeId::of::<Cal>());
    assert!(check.name.ends_with("Cal"));
    let reconcile = spec
        .reconcile_state_type()
        .expect("reconcile takes a context");
    assert_eq!(reconcile.id, TypeId::of::<Cal>());
}

#[test]
fn a_check_runs_against_the_state_its_signature_names() {
    let caller = Caller::new("me", crate::Policy::new());
    let cx = |state| CallContext {
        state,
        parts: &[],
        idempotency_key: "k",
        session: "s".into(),
        caller: &caller,
        transaction: None,
    };
    let (cal, unit): (Arc<dyn Any + Send + Sync>, Arc<dyn Any + Send + Sync>) =
        (Arc::new(Cal), Arc::new(()));
    assert!(Cancel::check(&NoArgs {}, &cx(&cal)).is_ok());
    // Another state is what the dispatcher's builder refuses up front.
    assert!(Cancel::check(&NoArgs {}, &cx(&unit)).is_err());
}
