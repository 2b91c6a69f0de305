//! Native protocol (in progress).
