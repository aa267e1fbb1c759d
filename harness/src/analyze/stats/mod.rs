//! The statistics the classifier is built from, one method per file: robust location and noise
//! scale, the Theil-Sen slope with Sen's interval, the Mann-Kendall trend test and the search for
//! where warm-up ends.

pub(crate) mod changepoint;
pub(crate) mod mann_kendall;
pub(crate) mod mann_whitney;
pub(crate) mod ratchet;
pub(crate) mod robust;
pub(crate) mod theil_sen;
