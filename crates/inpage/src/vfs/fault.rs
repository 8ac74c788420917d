//! STUB — replaced by the VFS helper.
#[derive(Debug, Default)]
pub struct FaultPlan;
#[derive(Debug)]
pub struct FaultVfs;
