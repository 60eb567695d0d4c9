"""Runner configs of the registered tasks (named by the tasks' ``shac_cfg_entry_point`` and
``rsl_rl_cfg_entry_point``)."""
