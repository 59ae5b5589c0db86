//! cordon-proxy's integration tests, one binary (`cargo nextest run -p cordon-proxy`): the
//! proxy against real sockets.

mod proxy;
