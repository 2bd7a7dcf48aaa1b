"""model/hf"""
