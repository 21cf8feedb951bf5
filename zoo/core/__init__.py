"""Pieces every model shares: the LightningModule base, data helpers, figure logging."""
