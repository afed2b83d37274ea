"""filegram-ray: FileGram (engine, FileGramOS memory, FileGramBench) as distributed batch jobs on Ray."""

__version__ = "0.1.0"
