//! The commands besides `run`: each speaks to a person on a terminal (`servers`, `doctor`,
//! `image`, `setup`, `exec`, `audit`, `kube`), and [`safe_line`] is the last escape before that terminal.

pub mod audit;
pub mod doctor;
pub mod exec;
pub mod image;
pub mod kube;
pub mod safe_line;
pub mod servers;
pub mod servers_allow;
pub mod setup;
