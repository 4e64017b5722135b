//! The trusted data directory: content-addressed blobs and durable transaction records.
