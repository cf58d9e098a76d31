"""A server eagle3 starts is named, never by its path: clients, generate's records and the model card
see `serve.served_model_name`, else the model folder's name (vLLM's default name is the path)."""

from eagle3_core.serve import ServeConfig, VLLMServer


def test_a_server_is_named_by_its_folder_unless_the_recipe_names_it(tmp_path):
    folder = tmp_path / "models" / "Qwen3-8B"
    folder.mkdir(parents=True)

    unnamed = VLLMServer(folder, ServeConfig(device="cpu", port=8000))
    named = VLLMServer(folder, ServeConfig(device="cpu", port=8000, served_model_name="qwen3"))
    respelt = VLLMServer(f"{folder}/../Qwen3-8B/", ServeConfig(device="cpu", port=8000))

    for server, name in ((unnamed, "Qwen3-8B"), (named, "qwen3"), (respelt, "Qwen3-8B")):
        cmd = server.command("python")
        assert server.model == name and cmd[cmd.index("--served-model-name") + 1] == name
        assert [w for w in cmd if str(tmp_path) in w] == [cmd[cmd.index("--model") + 1]]  # the path: only there
