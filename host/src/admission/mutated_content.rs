//! What a mutated object may say: the hook where the host's content checks judge the object a
//! mutating webhook answered, as they judge an object a reconcile applies.
//!
//! [`content_refusal`] is called by the handler on every mutated object that passed
//! [`mutation_patch`](super::patch::mutation_patch), before the patch is answered; a refusal
//! denies the request (fail closed) with its message. The Pod host-access check of the policy
//! (host namespaces, `hostPath`, privileged containers, added capabilities) belongs here.

use serde_json::Value;

use crate::policy::Grants;

/// Why `mutated`, answered by a plugin granted `grants`, may not be admitted; `None` when
/// nothing refuses it. No content check is wired in yet: every object passes.
pub fn content_refusal(grants: &Grants, mutated: &Value) -> Option<String> {
    let _ = (grants, mutated);
    None
}
