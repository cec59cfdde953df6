"""The Keystone PEFT tuner: ``KeystoneConfig`` (config), ``KeystoneLayer`` (layer), ``KeystoneModel``
(model)."""
