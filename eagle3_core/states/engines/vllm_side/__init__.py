"""Code that runs inside the vLLM environment (.venv-vllm), not the project's.

These modules import only vllm, torch and safetensors (the vLLM venv has no eagle3 installed);
the driver puts this folder on PYTHONPATH and runs ``eagle3_extract_worker.py`` with the
vLLM venv's Python. vLLM imports the connector by module name (``kv_connector_module_path``).
"""
