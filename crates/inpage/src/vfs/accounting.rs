//! STUB — replaced by the VFS helper.
#[derive(Debug, Clone, Copy)]
pub enum IoKind { Read }
#[derive(Debug, Default)]
pub struct IoStats;
#[derive(Debug, Default, Clone)]
pub struct IoStatsSnapshot;
#[derive(Debug)]
pub struct AccountingVfs;
