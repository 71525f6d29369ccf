"""The endpoint's data plane: Metadata, Produce, Fetch and ListOffsets over the log directory's partition logs."""
