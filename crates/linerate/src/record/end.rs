//! Which end of a test something belongs to: the client or the server. One type for the
//! stream sets that run an end, the record's results of each end, the summaries and verdicts
//! that name an end, and the reports that print it — instead of the words `"client"` and
//! `"server"` compared as text in each of them, where a typo compiles and silently matches
//! nothing. It lives in `record` because every layer above may import it.

use std::fmt;

use linerate_proto::{Flow, StreamRole, TestSpec};
use serde::{Deserialize, Serialize};

/// One end of a test. Printed and serialised as `client` and `server`: the words the JSON,
/// CSV and text outputs have always used (docs/JSON.md), so they are a public interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// The end that asked for the test.
    Client,
    /// The end that serves it.
    Server,
}

impl End {
    /// Both ends, client first: the order every table and summary lists them in.
    pub const BOTH: [End; 2] = [End::Client, End::Server];

    /// The end's name as outputs print it: `client` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            End::Client => "client",
            End::Server => "server",
        }
    }

    /// How many of `spec`'s streams this end plays `role` on.
    pub fn streams_in(self, spec: &TestSpec, role: StreamRole) -> usize {
        spec.stream_plan().iter().filter(|(_, f)| self.role(*f) == role).count()
    }

    /// The role this end plays on a stream flowing `flow`.
    pub fn role(self, flow: Flow) -> StreamRole {
        match (self, flow) {
            (End::Client, Flow::ClientToServer) | (End::Server, Flow::ServerToClient) => {
                StreamRole::Sender
            }
            _ => StreamRole::Receiver,
        }
    }
}

impl fmt::Display for End {
    /// The bare word; padding and width flags apply (`{:<6}` in the text tables).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_and_serialises_as_the_words_outputs_always_used() {
        for (end, word) in [(End::Client, "client"), (End::Server, "server")] {
            assert_eq!(end.as_str(), word);
            assert_eq!(end.to_string(), word);
            assert_eq!(format!("{end:<7}|"), format!("{word:<7}|"), "padding applies");
            let json = serde_json::to_string(&end).expect("serialise");
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<End>(&json).expect("read back"), end);
        }
    }

    #[test]
    fn roles_follow_the_flow() {
        assert_eq!(End::Client.role(Flow::ClientToServer), StreamRole::Sender);
        assert_eq!(End::Server.role(Flow::ClientToServer), StreamRole::Receiver);
        assert_eq!(End::Client.role(Flow::ServerToClient), StreamRole::Receiver);
        assert_eq!(End::Server.role(Flow::ServerToClient), StreamRole::Sender);
    }
}
