"""PEFT host components (configs built on peft's public extension points)."""
