//! # ingress: what comes in from outside
//!
//! [`webhook`]: `POST /telegram/webhook`, the only hot path. Later inbound channels land here.
//!
//! Invariants (INVARIANTS.md): "The webhook never calls the model": ingress records and
//! hands over; it never waits for a reply to be made.

pub mod webhook;
