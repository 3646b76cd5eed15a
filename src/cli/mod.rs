//! The commands: `run` (one client over stdio), and those that speak to a person on a terminal
//! (`servers`, `doctor`, `image`, `setup`, `exec`, `audit`, `kube`, `login`, `logout`, `skills`); [`safe_line`] is the last
//! escape before that terminal. `serve --http` is `crate::http`.

pub mod audit;
pub mod audit_verify;
pub mod doctor;
pub mod exec;
pub mod image;
pub mod kube;
pub mod login;
pub mod run;
pub mod safe_line;
pub mod servers;
pub mod servers_allow;
pub mod setup;
pub mod skills;
