//! `?` in the tool's body, written out as Rust does it, through toolcall's
//! traits: `x?` becomes
//!
//! ```text
//! match Question::branch(x) {
//!     Ok(value) => value,
//!     Err(error) => return Err(QuestionError::into_error(error)),
//! }
//! ```
//!
//! which is what `?` does (`From::from` on the error), so that an error
//! with no `From` into the tool's error type (`std::io::Error` under a tool
//! returning `Result<T, ToolError>`) is told in toolcall's words: which
//! `ToolError` to map it to, and what each means to the dispatcher.
//!
//! Only the `?` that return from the tool are written so: not those in a
//! closure, an `async` block, a `try` or `const` block or a nested item,
//! which return from those, nor those in a macro's arguments, which are
//! not parsed.

use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use quote::{ToTokens as _, quote, quote_spanned};
use syn::spanned::Spanned as _;
use syn::{Block, Expr, Local, Stmt};

use super::respan;

/// Writes out every `?` of `block` that returns from the tool.
pub(crate) fn write_out(block: &mut Block, private: &TokenStream) {
    Questions { private }.block(block);
}

/// The walk over the body (syn's `visit-mut` is not among the features
/// the workspace asks of it).
struct Questions<'a> {
    /// `::toolcall::__private`, or the same under `crate = path`.
    private: &'a TokenStream,
}

impl Questions<'_> {
    fn block(&self, block: &mut Block) {
        for stmt in &mut block.stmts {
            match stmt {
                Stmt::Local(local) => self.local(local),
                Stmt::Expr(expr, _) => self.expr(expr),
                // An item's `?` returns from it; a macro's are not parsed.
                Stmt::Item(_) | Stmt::Macro(_) => {}
            }
        }
    }

    fn local(&self, local: &mut Local) {
        let Some(init) = &mut local.init else { return };
        self.expr(&mut init.expr);
        let Some((_, diverge)) = &mut init.diverge else {
            return;
        };
        self.expr(diverge);
        // `let ... = x? else { ... }`: what `x?` is written as ends with a
        // `}`, which the value of a `let` with an `else` must not.
        if ends_with_brace(init.expr.to_token_stream()) {
            let span = Span::call_site().located_at(init.expr.span());
            let value = &init.expr;
            let parenthesized = quote_spanned!(span=> (#value));
            *init.expr = Expr::Verbatim(parenthesized);
        }
    }

    fn exprs<'e>(&self, exprs: impl IntoIterator<Item = &'e mut Expr>) {
        for expr in exprs {
            self.expr(expr);
        }
    }

    fn expr(&self, expr: &mut Expr) {
        match expr {
            Expr::Array(e) => self.exprs(&mut e.elems),
            Expr::Assign(e) => self.exprs([&mut *e.left, &mut *e.right]),
            Expr::Await(e) => self.expr(&mut e.base),
            Expr::Binary(e) => self.exprs([&mut *e.left, &mut *e.right]),
            Expr::Block(e) => self.block(&mut e.block),
            Expr::Break(e) => self.exprs(e.expr.as_deref_mut()),
            Expr::Call(e) => {
                self.expr(&mut e.func);
                self.exprs(&mut e.args);
            }
            Expr::Cast(e) => self.expr(&mut e.expr),
            Expr::Field(e) => self.expr(&mut e.base),
            Expr::ForLoop(e) => {
                self.expr(&mut e.expr);
                self.block(&mut e.body);
            }
            Expr::Group(e) => self.expr(&mut e.expr),
            Expr::If(e) => {
                self.expr(&mut e.cond);
                self.block(&mut e.then_branch);
                if let Some((_, otherwise)) = &mut e.else_branch {
                    self.expr(otherwise);
                }
            }
            Expr::Index(e) => self.exprs([&mut *e.expr, &mut *e.index]),
            Expr::Let(e) => self.expr(&mut e.expr),
            Expr::Loop(e) => self.block(&mut e.body),
            Expr::Match(e) => {
                self.expr(&mut e.expr);
                for arm in &mut e.arms {
                    if let Some((_, guard)) = &mut arm.guard {
                        self.expr(guard);
                    }
                    self.expr(&mut arm.body);
                }
            }
            Expr::MethodCall(e) => {
                self.expr(&mut e.receiver);
                self.exprs(&mut e.args);
            }
            Expr::Paren(e) => self.expr(&mut e.expr),
            Expr::Range(e) => {
                self.exprs(e.start.as_deref_mut());
                self.exprs(e.end.as_deref_mut());
            }
            Expr::RawAddr(e) => self.expr(&mut e.expr),
            Expr::Reference(e) => self.expr(&mut e.expr),
            // Not the length, a constant.
            Expr::Repeat(e) => self.expr(&mut e.expr),
            Expr::Return(e) => self.exprs(e.expr.as_deref_mut()),
            Expr::Struct(e) => {
                for field in &mut e.fields {
                    self.expr(&mut field.expr);
                }
                self.exprs(e.rest.as_deref_mut());
            }
            Expr::Tuple(e) => self.exprs(&mut e.elems),
            Expr::Unary(e) => self.expr(&mut e.expr),
            Expr::Unsafe(e) => self.block(&mut e.block),
            Expr::While(e) => {
                self.expr(&mut e.cond);
                self.block(&mut e.body);
            }
            Expr::Try(e) => {
                self.expr(&mut e.expr);
                if e.attrs.is_empty() {
                    let written = self.written_out(&e.expr, e.question_token.span);
                    *expr = Expr::Verbatim(written);
                }
            }
            // A closure's, an `async` block's, a `try` block's `?` returns
            // from it; a `const` block has none; a macro's is not parsed.
            _ => {}
        }
    }

    /// `operand?` written out. The traits' paths and the error's conversion
    /// are spanned on the `?`, where their messages then point; the rest
    /// is the macro's, located there too. In an invisible group, so that
    /// it stays one operand where it stands (`x?.len()`).
    fn written_out(&self, operand: &Expr, question: Span) -> TokenStream {
        let private = self.private;
        let branch = respan(quote!(#private::Question::branch), question);
        let into_error = respan(
            quote!(#private::QuestionError::into_error(__toolcall_error)),
            question,
        );
        let scaffold = Span::call_site().located_at(question);
        let operand = operand.to_token_stream();
        let written = quote_spanned! {scaffold=>
            match #branch(#operand) {
                ::core::result::Result::Ok(__toolcall_value) => __toolcall_value,
                ::core::result::Result::Err(__toolcall_error) => {
                    return ::core::result::Result::Err(#into_error);
                }
            }
        };
        let mut group = Group::new(Delimiter::None, written);
        group.set_span(scaffold);
        TokenTree::Group(group).into()
    }
}

/// Whether `tokens` end with a `}`, in invisible groups or not.
fn ends_with_brace(tokens: TokenStream) -> bool {
    match tokens.into_iter().last() {
        Some(TokenTree::Group(group)) => match group.delimiter() {
            Delimiter::Brace => true,
            Delimiter::None => ends_with_brace(group.stream()),
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use quote::{ToTokens as _, quote};

    fn written(body: proc_macro2::TokenStream) -> String {
        let mut block: syn::Block = syn::parse2(body).unwrap();
        super::write_out(&mut block, &quote!(::toolcall::__private));
        block.to_token_stream().to_string()
    }

    #[test]
    fn each_question_mark_of_the_body_goes_through_the_traits() {
        let text = written(quote!({
            let text = std::fs::read_to_string(path)?;
            Ok(text.parse::<u32>()?.to_string())
        }));
        assert_eq!(text.matches("Question :: branch").count(), 2, "{text}");
        assert_eq!(text.matches("QuestionError :: into_error").count(), 2);
        assert!(!text.contains('?'), "{text}");
    }

    #[test]
    fn a_let_else_whose_value_ends_with_a_question_mark_gets_parentheses() {
        let text = written(quote!({
            let Some(order) = load(id).map_err(ToolError::transient)? else {
                return Err(not_found());
            };
            let Some(line) = lines(&order?) else {
                return Ok(0);
            };
            Ok(line)
        }));
        assert!(text.starts_with("{ let Some (order) = (match"), "{text}");
        assert!(text.contains("let Some (line) = lines"), "{text}");
    }

    #[test]
    fn a_question_mark_that_returns_from_something_else_is_left_alone() {
        let text = written(quote!({
            let parse = |s: &str| -> Option<u32> { s.parse().ok()?.checked_add(1) };
            let later = async { read().await? };
            fn helper() -> Option<u8> {
                None?
            }
            let listed = vec![first()?];
            Ok((parse, later, helper, listed))
        }));
        assert!(!text.contains("Question"), "{text}");
        assert_eq!(text.matches('?').count(), 4, "{text}");
    }
}
