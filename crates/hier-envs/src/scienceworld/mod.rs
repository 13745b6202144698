//! ScienceWorld (in progress).
