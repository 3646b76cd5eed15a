//! `save_skill`, `list_skills` and `load_skill`: the run's skills, kept by the backend's
//! [`SkillStore`](crate::skills::SkillStore). A skill belongs to the client token that saved it
//! under `serve` (a caller with an identity); the operator's own runs share the ownerless ones.

use serde_json::{json, Value};

use super::{caller, UpstreamHostCalls};
use crate::calls::{BackendCall, CallContext, CallError, ErrorKind};
use crate::skills::{Skill, SkillError, SkillStore};

impl From<SkillError> for CallError {
    fn from(e: SkillError) -> Self {
        let kind = match e {
            SkillError::NotApproved { .. } => ErrorKind::NotApproved,
            _ => ErrorKind::BadRequest,
        };
        CallError {
            kind,
            message: e.to_string(),
        }
    }
}

/// Whose skills the run of `ctx` sees: its caller's token name when it has an identity.
pub(super) fn owner(ctx: &CallContext) -> Option<String> {
    caller(ctx)
        .filter(|c| c.identity.is_some())
        .map(|c| c.token.clone())
}

/// One skill as listed.
fn listed(s: &Skill) -> Value {
    json!({
        "name": s.name,
        "digest": s.digest,
        "state": s.state().as_str(),
        "description": s.description,
        "is_async": s.is_async,
    })
}

impl UpstreamHostCalls {
    /// Answers a skill method (the store's file work off the async threads).
    pub(super) async fn skill_call(
        &self,
        ctx: &CallContext,
        call: BackendCall,
    ) -> Result<Value, CallError> {
        let Some(store) = self.skills.clone() else {
            return Err(CallError::bad_request("skills are not kept by this bridge"));
        };
        let owner = owner(ctx);
        tokio::task::spawn_blocking(move || answer(&store, owner, call))
            .await
            .map_err(|_| CallError::bad_request("the skills store failed"))?
    }
}

/// A skill method answered from `store` for `owner`.
fn answer(
    store: &SkillStore,
    owner: Option<String>,
    call: BackendCall,
) -> Result<Value, CallError> {
    match call {
        BackendCall::SaveSkill {
            name,
            source,
            is_async,
            description,
        } => {
            let skill = Skill::new(&name, source, is_async, &description, owner)?;
            let digest = skill.digest.clone();
            let state = store.save(skill)?;
            Ok(json!({"name": name, "digest": digest, "state": state.as_str()}))
        }
        BackendCall::ListSkills => Ok(Value::Array(
            store.list(owner.as_deref())?.iter().map(listed).collect(),
        )),
        BackendCall::LoadSkill { name } => {
            crate::skills::check_name(&name)?;
            let s = store.load(owner.as_deref(), &name)?;
            Ok(json!({
                "name": s.name,
                "source": s.source,
                "digest": s.digest,
                "is_async": s.is_async,
            }))
        }
        other => Err(CallError::bad_request(format!(
            "'{}' is not a skill method",
            other.method().name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_approved_is_its_own_kind_naming_the_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SkillStore::new(dir.path());
        let save = BackendCall::SaveSkill {
            name: "f".into(),
            source: "def f():\n    return 1\n".into(),
            is_async: false,
            description: "One.".into(),
        };
        let saved = answer(&store, None, save).expect("saved");
        assert_eq!(saved["state"], "pending");
        let load = || BackendCall::LoadSkill { name: "f".into() };
        let err = answer(&store, None, load()).expect_err("pending");
        assert_eq!(err.kind, ErrorKind::NotApproved);
        assert!(
            err.message.contains("mcp-code-bridge skills --approve f"),
            "{}",
            err.message
        );
        let listed = answer(&store, None, BackendCall::ListSkills).expect("listed");
        assert_eq!(listed[0]["state"], "pending");
        assert_eq!(listed[0]["description"], "One.");
        let digest = listed[0]["digest"].as_str().expect("digest").to_string();
        store.approve(None, "f", &digest).expect("approved");
        assert_eq!(
            answer(&store, None, load()).expect("loads")["digest"],
            digest.as_str()
        );
        // Another token's run does not see it.
        let theirs = answer(&store, Some("alice".into()), load()).expect_err("not theirs");
        assert_eq!(theirs.kind, ErrorKind::BadRequest);
        let bad = answer(
            &store,
            None,
            BackendCall::LoadSkill {
                name: "__path__".into(),
            },
        );
        assert_eq!(bad.expect_err("bad name").kind, ErrorKind::BadRequest);
    }
}
