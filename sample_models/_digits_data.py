"""Shared digits data split used by make_digits.py (torch) and make_tflite.py (TF).

Only numpy and scikit-learn are needed, so it runs in either Python environment.
Both scripts get the exact same stratified train/test split.
"""
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SPLIT_SEED = 0
TEST_FRACTION = 0.25
N_CALIB = 64


def load_split():
    """Return (x_train, x_test, y_train, y_test); x is float32 [N, 8, 8] in [0, 1]."""
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).astype(np.float32)  # pixels are 0..16
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=y
    )
    return (np.ascontiguousarray(x_tr), np.ascontiguousarray(x_te),
            np.ascontiguousarray(y_tr), np.ascontiguousarray(y_te))
