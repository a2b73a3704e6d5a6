"""Text analysis shared by ingestion and search: the lexical analyzer, document structure, chunking."""
