import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ratiotune.training.models import char_tokenizer, load_agents


def test_char_tokenizer_round_trips_text():
    tokenizer = char_tokenizer()
    text = "Tell a joke about dinosaurs:\n 42!"
    ids = tokenizer(text).input_ids
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([*ids, tokenizer.eos_token_id, tokenizer.pad_token_id], skip_special_tokens=True) == text


def test_qwen_vocab_fillers_decode_to_nothing_also_after_a_save(tmp_path):
    """Qwen's 151,936 ids: any id a random model samples decodes (fillers to nothing), saved or not."""
    tokenizer = char_tokenizer(151_936)
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    text = "Tell a joke:"
    for tok in (tokenizer, loaded):
        assert len(tok) == 151_936
        ids = tok(text).input_ids
        assert tok.decode([ids[0], 151_935, *ids[1:], 200, tok.eos_token_id], skip_special_tokens=True) == text
        assert tok.decode([151_935]) == "<x151935>"  # a token of its own, not an unknown


def test_builtin_tiny_is_one_network_whatever_the_global_seed():
    """Like a downloaded checkpoint: the trial seed changes sampling, never the starting weights."""
    torch.manual_seed(3)
    (a0, a1), _ = load_agents("builtin:tiny")
    torch.manual_seed(4)
    (b0, _), _ = load_agents("builtin:tiny")
    assert a0 is not a1
    assert all(torch.equal(p, q) for p, q in zip(a0.parameters(), a1.parameters()))  # same start, like two hub loads
    assert all(torch.equal(p, q) for p, q in zip(a0.parameters(), b0.parameters()))
    # Building it leaves the caller's random stream where it was.
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    load_agents("builtin:tiny")
    assert torch.equal(torch.rand(3), expected)
    with torch.no_grad():
        next(a0.parameters()).add_(1.0)
    assert not torch.equal(next(a0.parameters()), next(a1.parameters()))  # no shared storage


def test_local_directory_loads_through_the_hub_code_path(tmp_path):
    """A saved tiny model loads with from_pretrained, exactly as a hub id would."""
    (agent, _), tokenizer = load_agents("builtin:tiny")
    agent.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    agents, loaded_tokenizer = load_agents(str(tmp_path / "tiny"))
    assert (loaded_tokenizer.pad_token, loaded_tokenizer.eos_token) == ("<pad>", "<eos>")
    assert loaded_tokenizer.decode(loaded_tokenizer("abc:").input_ids) == "abc:"
    for loaded in agents:
        assert all(torch.equal(p, q) for p, q in zip(agent.parameters(), loaded.parameters()))
    # And plain transformers reads the same folder.
    AutoModelForCausalLM.from_pretrained(tmp_path / "tiny")
    AutoTokenizer.from_pretrained(tmp_path / "tiny")
