//! Which client config files `setup` works on: the user-scope files of `config/clients.rs`, for
//! the clients that are on this machine.

use std::path::Path;

use crate::config::{client_config_files, Client, ClientFile, Scope};

/// The clients' user files found, and the clients looked for but not found.
#[derive(Debug, Default)]
pub struct Found {
    /// The files to work on, in precedence order.
    pub files: Vec<ClientFile>,
    /// Clients asked for (or, with none asked for, any client) with no file here.
    pub missing: Vec<Client>,
}

/// The user-scope config files of `chosen` (every client when empty) under `home`.
///
/// A client is here when its file exists, or (for all but Claude Code, whose file sits in the
/// home folder itself) when the folder the client keeps it in exists: Cursor, VS Code, Claude
/// Desktop and Windsurf create that folder when installed and the file only once a server is
/// added, so the file is then created.
pub fn find(home: &Path, claude_dir: Option<&Path>, chosen: &[Client]) -> Found {
    let wanted = |c: Client| chosen.is_empty() || chosen.contains(&c);
    let mut found = Found::default();
    let mut files: Vec<ClientFile> = client_config_files(Some(home), None, claude_dir)
        .into_iter()
        .filter(|f| f.scope == Scope::User && wanted(f.client) && present(f))
        .collect();
    files.sort_by_key(|f| f.client);
    for client in Client::ALL {
        if wanted(client) && !files.iter().any(|f| f.client == client) {
            found.missing.push(client);
        }
    }
    found.files = files;
    found
}

fn present(f: &ClientFile) -> bool {
    f.path.is_file()
        || (f.client != Client::ClaudeCode && f.path.parent().is_some_and(Path::is_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_found_by_its_file_or_its_folder() {
        let d = tempfile::tempdir().expect("tempdir");
        let home = d.path();
        std::fs::create_dir_all(home.join(".cursor")).expect("mkdir");
        std::fs::create_dir_all(home.join(".config/Code/User")).expect("mkdir");
        std::fs::write(home.join(".config/Code/User/mcp.json"), "{}").expect("write");
        let f = find(home, None, &[]);
        let got: Vec<_> = f
            .files
            .iter()
            .map(|f| {
                (
                    f.client,
                    f.path.strip_prefix(home).expect("under home").to_owned(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Client::Cursor, ".cursor/mcp.json".into()),
                (Client::VsCode, ".config/Code/User/mcp.json".into()),
            ]
        );
        assert_eq!(
            f.missing,
            [Client::ClaudeCode, Client::ClaudeDesktop, Client::Windsurf],
            "the home folder alone does not mean Claude Code is here"
        );
        let f = find(home, None, &[Client::Windsurf]);
        assert!(f.files.is_empty());
        assert_eq!(f.missing, [Client::Windsurf]);
        std::fs::write(home.join(".claude.json"), "{}").expect("write");
        let claude = home.join("claude-dir");
        std::fs::create_dir_all(&claude).expect("mkdir");
        std::fs::write(claude.join(".claude.json"), "{}").expect("write");
        let f = find(home, Some(&claude), &[Client::ClaudeCode]);
        assert_eq!(f.files.len(), 1);
        assert_eq!(
            f.files[0].path,
            claude.join(".claude.json"),
            "CLAUDE_CONFIG_DIR wins"
        );
    }
}
