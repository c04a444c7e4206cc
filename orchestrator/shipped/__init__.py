"""What the package ships besides code: the playbooks (from `playbooks/`) and the tuning profiles
(from `configs/tuning/`), mapped here by pyproject.toml so an installed wheel carries them."""
