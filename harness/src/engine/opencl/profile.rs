//! The reference engine's profiles: a clean run and the injected bug classes of the field.

use std::fmt;

use crate::scenario::OPENCL_PROFILES;

/// How the reference OpenCL engine behaves at session close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenClProfile {
    /// Releases everything it creates.
    Clean,
    /// Forgets the session's scratch buffers at close (the field bug: per-conversation scratch
    /// never released).
    LeakScratch,
    /// Forgets the session's KV-cache buffer at close.
    LeakKv,
    /// Retains the KV-cache buffer at open and never releases that reference.
    LeakRetain,
}

impl OpenClProfile {
    /// Parses a profile name from [`OPENCL_PROFILES`]; `None` means `clean`.
    pub fn parse(name: Option<&str>) -> Result<Self, String> {
        Ok(match name.unwrap_or("clean") {
            "clean" => Self::Clean,
            "leak-scratch" => Self::LeakScratch,
            "leak-kv" => Self::LeakKv,
            "leak-retain" => Self::LeakRetain,
            other => {
                return Err(format!(
                    "unknown OpenCL profile `{other}` (known: {})",
                    OPENCL_PROFILES.join(", ")
                ))
            }
        })
    }

    /// The profile's name as in scenarios.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::LeakScratch => "leak-scratch",
            Self::LeakKv => "leak-kv",
            Self::LeakRetain => "leak-retain",
        }
    }
}

impl fmt::Display for OpenClProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_profile_parses_and_round_trips() {
        for name in OPENCL_PROFILES {
            assert_eq!(OpenClProfile::parse(Some(name)).unwrap().as_str(), *name);
        }
        assert_eq!(OpenClProfile::parse(None).unwrap(), OpenClProfile::Clean);
    }

    #[test]
    fn an_unknown_profile_names_the_known_ones() {
        let err = OpenClProfile::parse(Some("leak-everything")).unwrap_err();
        assert!(
            err.contains("`leak-everything`") && err.contains("leak-retain"),
            "{err}"
        );
    }
}
