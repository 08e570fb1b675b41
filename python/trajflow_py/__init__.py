"""trajflow's Python side: the PyTorch trainer worker and model tooling for real models."""
