//! The router's seam on the world (to come).
