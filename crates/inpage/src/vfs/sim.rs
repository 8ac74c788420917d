//! STUB — replaced by the VFS helper.
/// Which misbehaviours a simulated power cut may show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashModel {
    pub lose: bool,
    pub reorder: bool,
    pub tear: bool,
    pub atomic_pages: Option<usize>,
}
/// Simulated disk.
#[derive(Debug, Clone, Default)]
pub struct SimVfs;
